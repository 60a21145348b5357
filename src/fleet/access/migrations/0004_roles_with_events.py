"""The admin role holds the webhooks' permissions (`events.*`, fleet.events): the roles synced again
(fleet.access.roles), the new app's permissions made first (they are normally made after the last
migration)."""

from django.contrib.auth.management import create_permissions
from django.db import migrations

from fleet.access.roles import roles_sync


def sync(apps, schema_editor):
    for app_config in apps.get_app_configs():
        app_config.models_module = True
        create_permissions(app_config, apps=apps, verbosity=0)
        app_config.models_module = None
    roles_sync(apps.get_model("auth", "Group"), apps.get_model("auth", "Permission"))


class Migration(migrations.Migration):
    dependencies = [("access", "0003_oidc_identity"), ("events", "0001_outbox_and_webhooks")]

    operations = [migrations.RunPython(sync, migrations.RunPython.noop)]
