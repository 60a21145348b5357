from __future__ import annotations

from typing import Any

from django.apps import AppConfig, apps
from django.db.models.signals import post_migrate


class AccessConfig(AppConfig):
    name = "fleet.access"
    label = "access"
    verbose_name = "Access"

    def ready(self) -> None:
        # After every migrate, the roles follow the models as they are now: a model added later
        # (a new record type, say) gets its view permission in the viewer role without anyone
        # remembering to run `fleet roles`.
        post_migrate.connect(_sync_roles, dispatch_uid="fleet.access.roles")


def _sync_roles(sender: AppConfig, **kwargs: Any) -> None:
    """Run once per migrate: when the last app with models has had its permissions created
    (post_migrate is sent per app, in INSTALLED_APPS order; this app has no models of its own)."""
    with_models = [config for config in apps.get_app_configs() if config.models_module is not None]
    if with_models and sender is with_models[-1]:
        from fleet.access.roles import roles_sync

        roles_sync()
