from django.apps import AppConfig


class FleetfileConfig(AppConfig):
    name = "fleet.fleetfile"
    label = "fleetfile"
    verbose_name = "Fleet as code"
