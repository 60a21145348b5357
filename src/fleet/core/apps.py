from django.apps import AppConfig


class CoreConfig(AppConfig):
    name = "fleet.core"
    label = "core"
    verbose_name = "Core"

    def ready(self) -> None:
        from fleet.core import schema  # noqa: F401  (registers the OpenAPI extensions)
