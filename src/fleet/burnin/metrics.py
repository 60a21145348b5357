"""Burn-in's metrics: what reconcile, the results upsert and dispatch did (counted by their
services once the transaction commits), and the projection read at scrape time.

Label values come from `fleet_rules.vocabulary`; every value of a closed label set is exported
from the start (at 0), so a rate over it exists before the first event.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import Protocol

from django.db.models import Count, Exists, Min, OuterRef, Q
from django.utils import timezone
from prometheus_client import Counter, Histogram
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.metrics_core import Metric

from fleet.burnin.models import AcceptanceCertificate, PolicyProgress, ReconcileSweep
from fleet.core.metrics import on_commit
from fleet.inventory.models import Device
from fleet_rules.evaluations import UpsertCounts
from fleet_rules.planning import Plan
from fleet_rules.vocabulary import (
    DeviceState,
    EvaluationOutcome,
    ExclusionReason,
    ReconcileOutcome,
    SkipReason,
    Verdict,
    WorkflowName,
)

RECONCILE_TARGETS = Counter(
    "fleet_reconcile_targets",
    "Reconcile targets by what their page did (written, unchanged, deferred), and rows deleted at sweep ends.",
    ["outcome"],
)
GUARD_TRIPS = Counter(
    "fleet_reconcile_guard_trips",
    "Sweeps whose final page kept vanished targets' rows because the deletion guard tripped.",
    ["site", "satellite", "resource_class"],
)
EVALUATION_RESULTS = Counter(
    "fleet_evaluation_results", "Posted evaluation results by what became of them.", ["outcome"]
)
DISPATCH_JOBS = Counter("fleet_dispatch_jobs_created", "Jobs created by rerun dispatches.", ["workflow"])
DISPATCH_SKIPS = Counter(
    "fleet_dispatch_skips", "Device × requirement pairs a dispatch skipped, by reason.", ["reason"]
)
#: Remediation ladder steps (docs/remediation.md) by step and outcome: counted when asked (`under_way`) and when
#: judged (`cured`, `persisted`, `failed`).
REMEDY_STEPS = Counter(
    "fleet_remedy_steps", "Remediation ladder steps by step (reset_gpu, reboot) and outcome.", ["step", "outcome"]
)


def remedy_step_counted(step: str, outcome: str) -> None:
    on_commit(lambda: REMEDY_STEPS.labels(step, outcome).inc())


DISPATCH_EXCLUDED = Counter("fleet_dispatch_excluded", "Devices a dispatch left out entirely, by reason.", ["reason"])
HOUR, DAY = 3600.0, 86400.0
TIME_TO_ACCEPT = Histogram(
    "fleet_time_to_accept_seconds",
    "Per device, enrolment to its first acceptance certificate.",
    ["site", "resource_class"],
    buckets=(HOUR, 4 * HOUR, 12 * HOUR, DAY, 2 * DAY, 4 * DAY, 7 * DAY, 14 * DAY, 30 * DAY, float("inf")),
)


class ReconcileCounters(Protocol):
    """A reconcile page's counters (`ReconcilePage`)."""

    written: int
    unchanged: int
    deferred: int
    deleted: int
    guard_tripped: bool


for _outcome in ReconcileOutcome:
    RECONCILE_TARGETS.labels(_outcome)
for _result in EvaluationOutcome:
    EVALUATION_RESULTS.labels(_result)
for _workflow in WorkflowName:
    DISPATCH_JOBS.labels(_workflow)
for _skip in SkipReason:
    DISPATCH_SKIPS.labels(_skip)
for _exclusion in ExclusionReason:
    DISPATCH_EXCLUDED.labels(_exclusion)


def reconcile_page_counted(*, site: str, satellite: str, resource_class: str, page: ReconcileCounters) -> None:
    """A reconcile page of the scope (site slug, satellite name, resource class): its targets by
    outcome, and a guard trip."""

    def record() -> None:
        for outcome in ReconcileOutcome:
            RECONCILE_TARGETS.labels(outcome).inc(getattr(page, outcome.value))
        if page.guard_tripped:
            GUARD_TRIPS.labels(site, satellite, resource_class).inc()

    on_commit(record)


def evaluation_results_counted(counts: UpsertCounts) -> None:
    def record() -> None:
        for outcome in EvaluationOutcome:
            EVALUATION_RESULTS.labels(outcome).inc(getattr(counts, outcome.value))

    on_commit(record)


def dispatch_counted(plan: Plan) -> None:
    """A dispatch's jobs (one per planned job: they are created in the same transaction), its
    skipped device × requirement pairs and its excluded devices."""

    def record() -> None:
        for job in plan.jobs:
            DISPATCH_JOBS.labels(job.workflow_name).inc()
        for group in plan.skips:
            DISPATCH_SKIPS.labels(group.reason).inc(len(group.device_ids))
        for exclusion in plan.exclusions:
            DISPATCH_EXCLUDED.labels(exclusion.reason).inc()

    on_commit(record)


# --- read at scrape time --------------------------------------------------------------------------


def projection_gauges() -> Iterable[Metric]:
    """`fleet_targets`, the age of each site's oldest `in_progress` target, and each scope's last
    whole sweep: two queries, whatever the fleet's size (grouped in the database)."""
    now = timezone.now()
    targets = GaugeMetricFamily(
        "fleet_targets",
        "Projection rows (targets) by site, resource class, requirement and verdict.",
        labels=["site", "resource_class", "requirement", "verdict"],
    )
    stuck = GaugeMetricFamily(
        "fleet_targets_in_progress_age_seconds",
        "Seconds since the oldest in_progress target of a site became in_progress (as reconciled).",
        labels=["site"],
    )
    oldest: dict[str, float] = {}
    rows = (
        PolicyProgress.objects.values_list("site__slug", "resource_class", "requirement__name", "verdict")
        .annotate(n=Count("id"), since=Min("reconciled_at", filter=Q(verdict=Verdict.IN_PROGRESS)))
        .order_by()
    )
    for site, resource_class, requirement, verdict, n, since in rows:
        targets.add_metric([site, resource_class, requirement, verdict], n)
        if since is not None:
            oldest[site] = max(oldest.get(site, 0.0), (now - since).total_seconds())
    for site, seconds in sorted(oldest.items()):
        stuck.add_metric([site], seconds)

    sweep_targets = GaugeMetricFamily(
        "fleet_reconcile_sweep_targets",
        "target_count of the last whole (every gate) reconcile sweep of each scope.",
        labels=["site", "satellite", "resource_class"],
    )
    sweep_age = GaugeMetricFamily(
        "fleet_reconcile_sweep_age_seconds",
        "Seconds since the last whole reconcile sweep of each scope completed.",
        labels=["site", "satellite", "resource_class"],
    )
    sweeps = ReconcileSweep.objects.filter(gate__isnull=True).values_list(
        "site__slug", "satellite__name", "resource_class", "target_count", "completed_at"
    )
    for site, satellite, resource_class, target_count, completed_at in sweeps:
        sweep_targets.add_metric([site, satellite, resource_class], target_count)
        sweep_age.add_metric([site, satellite, resource_class], (now - completed_at).total_seconds())
    return [targets, stuck, sweep_targets, sweep_age, _in_service_uncertified(now)]


def _in_service_uncertified(now: datetime) -> Metric:
    """Devices in service whose certificate no longer holds: the lifecycle never pulls a device out
    of service on its own, so this gauge (and its alert) is how people hear of it (one query)."""
    gauge = GaugeMetricFamily(
        "fleet_devices_in_service_uncertified",
        "Devices in service without a valid acceptance certificate, by site and resource class.",
        labels=["site", "resource_class"],
    )
    valid = AcceptanceCertificate.objects.filter(
        Q(valid_until__isnull=True) | Q(valid_until__gt=now), device=OuterRef("pk"), superseded_at__isnull=True
    )
    rows = (
        Device.objects.filter(state=DeviceState.IN_SERVICE)
        .exclude(Exists(valid))
        .values_list("site__slug", "resource_class")
        .annotate(n=Count("id"))
        .order_by()
    )
    for site, resource_class, n in rows:
        gauge.add_metric([site, resource_class], n)
    return gauge


def first_certificates_observed(observations: Iterable[tuple[str, str, float]]) -> None:
    """(site slug, resource class, seconds from enrolment) of each device's first certificate."""
    pending = list(observations)
    if not pending:
        return

    def record() -> None:
        for site, resource_class, seconds in pending:
            TIME_TO_ACCEPT.labels(site, resource_class).observe(max(seconds, 0.0))

    on_commit(record)
