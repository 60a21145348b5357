"""The table of the `shared` cache (throttle counters) when it is the database cache: created
here so that `fleet migrate` is the only setup step (no `createcachetable`)."""

from django.core.management import call_command
from django.db import migrations


def create(apps, schema_editor):
    call_command("createcachetable", "shared", database=schema_editor.connection.alias, verbosity=0)


def drop(apps, schema_editor):
    schema_editor.execute("DROP TABLE IF EXISTS fleet_shared_cache")


class Migration(migrations.Migration):
    initial = True
    operations = [migrations.RunPython(create, drop)]
