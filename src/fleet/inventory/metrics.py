"""Inventory's metrics, read at scrape time: how long ago each satellite's agent last sent a
heartbeat (one query). A satellite never heard from has no series."""

from __future__ import annotations

from collections.abc import Iterable

from django.utils import timezone
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.metrics_core import Metric

from fleet.inventory.models import Satellite


def satellite_gauges() -> Iterable[Metric]:
    now = timezone.now()
    seen = GaugeMetricFamily(
        "fleet_satellite_last_seen_seconds",
        "Seconds since the satellite's agent last sent a heartbeat.",
        labels=["site", "satellite"],
    )
    for site, name, last_seen_at in Satellite.objects.filter(last_seen_at__isnull=False).values_list(
        "site__slug", "name", "last_seen_at"
    ):
        if last_seen_at is not None:
            seen.add_metric([site, name], max(0.0, (now - last_seen_at).total_seconds()))
    return [seen]
