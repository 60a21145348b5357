"""The standard roles (viewer, operator, admin) as Django groups; see fleet.access.roles."""

from django.contrib.auth.management import create_permissions
from django.db import migrations

from fleet.access.roles import ROLES, roles_sync


def create_roles(apps, schema_editor):
    # Permissions are normally created after the last migration (post_migrate): make them now.
    for app_config in apps.get_app_configs():
        app_config.models_module = True
        create_permissions(app_config, apps=apps, verbosity=0)
        app_config.models_module = None
    roles_sync(apps.get_model("auth", "Group"), apps.get_model("auth", "Permission"))


def drop_roles(apps, schema_editor):
    apps.get_model("auth", "Group").objects.filter(name__in=ROLES).delete()


class Migration(migrations.Migration):
    dependencies = [
        ("auth", "0012_alter_user_first_name_max_length"),
        ("contenttypes", "0002_remove_content_type_name"),
        ("inventory", "0003_operatorcredential"),
        ("policies", "0002_threshold_statistic_not_blank"),
        ("jobs", "0001_initial"),
        ("burnin", "0001_initial"),
        ("oauth2_provider", "__latest__"),
    ]
    operations = [migrations.RunPython(create_roles, drop_roles)]
