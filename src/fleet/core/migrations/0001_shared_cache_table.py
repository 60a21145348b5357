"""The table of the `shared` cache (throttle counters) when it is the database cache: created
here so that `fleet migrate` is the only setup step (no `createcachetable`).

`createcachetable`'s positional arguments are *table names*, not cache aliases: this migration
once ran `createcachetable shared` and so made a table called `shared`, while the cache reads
`fleet_shared_cache`. Django's test runner runs `createcachetable` itself after migrating, which
hid it from every in-process test; the first token request of a freshly migrated server was a
500 (found by tests/reliability/test_faults.py). 0002 repairs databases migrated before the fix."""

from django.core.management import call_command
from django.db import migrations


def create(apps, schema_editor):
    # Without arguments: the table of every database cache that lacks one (none for Redis).
    call_command("createcachetable", database=schema_editor.connection.alias, verbosity=0)


def drop(apps, schema_editor):
    schema_editor.execute("DROP TABLE IF EXISTS fleet_shared_cache")


class Migration(migrations.Migration):
    initial = True
    operations = [migrations.RunPython(create, drop)]
