from django.apps import AppConfig


class CoreConfig(AppConfig):
    name = "fleet.core"
    label = "core"
    verbose_name = "Core"

    def ready(self) -> None:
        from fleet.core import lookups, metrics
        from fleet.core.logs import install_record_factory
        from fleet.core.permissions import register_scope_needs
        from fleet.core.probes import METRICS_SCOPE

        install_record_factory()
        lookups.register()
        # `/metrics` is outside the API: operator clients may be issued its scope when their owner
        # holds what the scraped gauges need.
        register_scope_needs(METRICS_SCOPE, metrics.scrape_permissions)
