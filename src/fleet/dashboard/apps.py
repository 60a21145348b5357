from django.apps import AppConfig


class DashboardConfig(AppConfig):
    """The operator dashboard: server-rendered pages over the domain's selectors and services."""

    name = "fleet.dashboard"
    label = "dashboard"
    verbose_name = "Dashboard"
