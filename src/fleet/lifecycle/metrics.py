"""The lifecycle's metrics: devices by state and breakers open (read at scrape time, two grouped
queries), and state changes by cause (counted when their transaction commits)."""

from __future__ import annotations

from collections.abc import Iterable

from django.db.models import Count
from prometheus_client import Counter
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.metrics_core import Metric

from fleet.core.metrics import on_commit
from fleet.inventory.models import Device
from fleet.lifecycle.models import Breaker
from fleet_rules.vocabulary import TransitionCause

TRANSITIONS = Counter(
    "fleet_lifecycle_transitions",
    "Device lifecycle state changes by cause (held_by_breaker: automatic moves the breaker held).",
    ["cause"],
)
for _cause in TransitionCause:
    TRANSITIONS.labels(_cause)


def transitions_counted(causes: Iterable[str]) -> None:
    counted = list(causes)

    def record() -> None:
        for cause in counted:
            TRANSITIONS.labels(cause).inc()

    if counted:
        on_commit(record)


def lifecycle_gauges() -> Iterable[Metric]:
    states = GaugeMetricFamily(
        "fleet_devices_by_state",
        "Devices by site, resource class and lifecycle state.",
        labels=["site", "resource_class", "state"],
    )
    for site, resource_class, state, n in (
        Device.objects.values_list("site__slug", "resource_class", "state").annotate(n=Count("id")).order_by()
    ):
        states.add_metric([site, resource_class, state], n)
    breakers = GaugeMetricFamily(
        "fleet_lifecycle_breaker_open",
        "1 while the circuit breaker of a site and resource class holds automatic moves to repair.",
        labels=["site", "resource_class"],
    )
    scopes: dict[tuple[str, str], float] = {}
    for site, resource_class, closed_at in Breaker.objects.values_list("site__slug", "resource_class", "closed_at"):
        key = (site, resource_class)
        scopes[key] = max(scopes.get(key, 0.0), 1.0 if closed_at is None else 0.0)
    for (site, resource_class), value in sorted(scopes.items()):
        breakers.add_metric([site, resource_class], value)
    return [states, breakers]
