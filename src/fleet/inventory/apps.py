from django.apps import AppConfig


class InventoryConfig(AppConfig):
    name = "fleet.inventory"
    label = "inventory"
    default_auto_field = "django.db.models.BigAutoField"
