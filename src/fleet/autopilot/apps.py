from django.apps import AppConfig


class AutopilotConfig(AppConfig):
    """The bring-up autopilot: per site, it dispatches, reruns, isolates and renews within a blast
    radius, and logs why (`fleet_rules.autopilot` decides, this app loads and acts)."""

    name = "fleet.autopilot"
    label = "autopilot"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from fleet.autopilot.metrics import autopilot_gauges
        from fleet.core.metrics import register_scrape_collector

        register_scrape_collector("autopilot", autopilot_gauges, permissions=("inventory.view_device",))
