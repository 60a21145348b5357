from django.apps import AppConfig


class LifecycleConfig(AppConfig):
    """The device lifecycle: state changes with their history, repairs, the circuit breaker."""

    name = "fleet.lifecycle"
    label = "lifecycle"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from fleet.core.metrics import register_scrape_collector
        from fleet.lifecycle.metrics import lifecycle_gauges

        register_scrape_collector("lifecycle", lifecycle_gauges, permissions=("inventory.view_device",))
