"""Databases migrated before 0001 was fixed have a cache table called `shared` and none called
`fleet_shared_cache`: create the right one and drop the stray table (only if it is a cache table
with nothing but expiring throttle counters in it)."""

from django.core.management import call_command
from django.db import migrations


def repair(apps, schema_editor):
    connection = schema_editor.connection
    call_command("createcachetable", database=connection.alias, verbosity=0)
    with connection.cursor() as cursor:
        if "shared" not in connection.introspection.table_names(cursor):
            return
        columns = {c.name for c in connection.introspection.get_table_description(cursor, "shared")}
    if columns == {"cache_key", "value", "expires"}:
        schema_editor.execute("DROP TABLE shared")


class Migration(migrations.Migration):
    dependencies = [("core", "0001_shared_cache_table")]
    operations = [migrations.RunPython(repair, migrations.RunPython.noop)]
