from django.apps import AppConfig


class AccessConfig(AppConfig):
    name = "fleet.access"
    label = "access"
    verbose_name = "Access"
