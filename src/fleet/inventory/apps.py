from django.apps import AppConfig


class InventoryConfig(AppConfig):
    name = "fleet.inventory"
    label = "inventory"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from django.core import checks

        from fleet.core.metrics import register_scrape_collector
        from fleet.inventory.checks import check_hostnames

        checks.register(check_hostnames, checks.Tags.database)
        from fleet.inventory.metrics import satellite_gauges

        register_scrape_collector("inventory", satellite_gauges, permissions=("inventory.view_satellite",))
