"""The autopilot's metrics: actions by kind and pass duration (counted by the leader's process,
added up through the multiprocess files), and at scrape time per site: devices under test against
the limit, devices waiting for burn-in, paused, and the time of the last action (the alert
`FleetAutopilotStalled` compares the two; deploy/prometheus/alerts.yml)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from django.db.models import Count, Exists, Max, OuterRef, Q
from prometheus_client import Counter, Histogram
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.metrics_core import Metric

from fleet.autopilot.models import AutopilotAction, SiteAutopilot
from fleet.inventory.models import Device
from fleet.jobs.models import JobDevice
from fleet_rules.autopilot import SiteFacts
from fleet_rules.vocabulary import AutopilotActionKind, DeviceState

ACTIONS = Counter("fleet_autopilot_actions", "Autopilot actions by kind (one per log line).", ["kind"])
for _kind in AutopilotActionKind:
    ACTIONS.labels(_kind)
PASS_SECONDS = Histogram(
    "fleet_autopilot_pass_seconds",
    "How long one autopilot pass over a site took (load, decide, act).",
    buckets=(0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30),
)


def pass_observed(facts: SiteFacts, logged: Sequence[AutopilotAction], seconds: float) -> None:
    for entry in logged:
        ACTIONS.labels(entry.kind).inc()
    if facts.settings.enabled and not facts.paused:
        PASS_SECONDS.observe(seconds)


def autopilot_gauges() -> Iterable[Metric]:
    """Per site with an autopilot row: three grouped statements (one when no site has one)."""
    rows = {a.site_id: a for a in SiteAutopilot.objects.select_related("site")}
    under = GaugeMetricFamily(
        "fleet_autopilot_devices_under_test", "Devices holding an active job, per site.", labels=["site"]
    )
    limit = GaugeMetricFamily(
        "fleet_autopilot_max_under_test", "The autopilot's limit of devices under test at once.", labels=["site"]
    )
    waiting = GaugeMetricFamily(
        "fleet_autopilot_devices_waiting",
        "Enrolled devices in burn-in states (staged, burn_in, maintenance) holding no job: what the autopilot "
        "could act on.",
        labels=["site"],
    )
    active = GaugeMetricFamily(
        "fleet_autopilot_active", "1 while the site's autopilot is enabled and not paused.", labels=["site"]
    )
    last = GaugeMetricFamily(
        "fleet_autopilot_last_action_timestamp_seconds",
        "When the site's autopilot last acted (Unix time; 0: never).",
        labels=["site"],
    )
    holding = Exists(JobDevice.objects.filter(device_id=OuterRef("id"), active=True))
    counts = {
        r["site_id"]: r
        for r in Device.objects.filter(site_id__in=rows, enrolled_at__isnull=False)
        .annotate(holding=holding)
        .values("site_id")
        .annotate(
            under=Count("id", filter=Q(holding=True)),
            waiting=Count(
                "id",
                filter=Q(holding=False, state__in=[DeviceState.STAGED, DeviceState.BURN_IN, DeviceState.MAINTENANCE]),
            ),
        )
        .order_by()
    }
    latest = dict(
        AutopilotAction.objects.filter(site_id__in=rows)
        .exclude(kind__in=[AutopilotActionKind.PAUSE, AutopilotActionKind.RESUME, AutopilotActionKind.DEFECT])
        .values_list("site_id")
        .annotate(at=Max("at"))
        .order_by()
    )
    for site_id, row in sorted(rows.items(), key=lambda kv: kv[1].site.slug):
        slug = [row.site.slug]
        counted = counts.get(site_id, {})
        under.add_metric(slug, counted.get("under", 0))
        limit.add_metric(slug, row.max_under_test)
        waiting.add_metric(slug, counted.get("waiting", 0))
        active.add_metric(slug, 1.0 if row.enabled and row.paused_at is None else 0.0)
        at = latest.get(site_id)
        last.add_metric(slug, at.timestamp() if at else 0.0)
    return [under, limit, waiting, active, last]
