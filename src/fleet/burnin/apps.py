from django.apps import AppConfig


class BurninConfig(AppConfig):
    name = "fleet.burnin"
    label = "burnin"
    verbose_name = "Burn-in results"
    default_auto_field = "django.db.models.BigAutoField"
