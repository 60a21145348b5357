"""Operators move devices through their lifecycle (`inventory.change_device`): the roles synced
again (fleet.access.roles)."""

from django.db import migrations

from fleet.access.roles import roles_sync


def sync(apps, schema_editor):
    roles_sync(apps.get_model("auth", "Group"), apps.get_model("auth", "Permission"))


class Migration(migrations.Migration):
    dependencies = [("access", "0001_roles")]

    operations = [migrations.RunPython(sync, migrations.RunPython.noop)]
