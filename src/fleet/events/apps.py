from django.apps import AppConfig


class EventsConfig(AppConfig):
    """The outbox and webhooks. Below the lifecycle (its writer composes the outbox insert into its
    one statement), above inventory (a subscription's site filter): every writer above may record
    an event, and nothing here imports a writer."""

    name = "fleet.events"
    label = "events"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from fleet.core.metrics import register_scrape_collector
        from fleet.events.metrics import events_gauges

        register_scrape_collector("events", events_gauges, permissions=("inventory.view_satellite",))
