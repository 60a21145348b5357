from django.apps import AppConfig


class DemoConfig(AppConfig):
    """`fleet demo`: the service with a simulated fleet (what `make run` runs)."""

    name = "fleet.demo"
    label = "demo"
    verbose_name = "Demo"
