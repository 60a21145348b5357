from django.apps import AppConfig


class RepairsConfig(AppConfig):
    """Repairs and the circuit breakers: recording a repair (the device goes back to burn-in and is
    dispatched again), the repair queue, and closing a breaker. Above burn-in: a repair dispatches
    through burn-in's reruns and judges again what burn-in counted."""

    name = "fleet.repairs"
    label = "repairs"
    default_auto_field = "django.db.models.BigAutoField"
