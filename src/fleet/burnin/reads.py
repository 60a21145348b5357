"""Reads for people: what the dashboard shows, as small dataclasses, each page in a constant
number of queries whatever the fleet's size (tests hold them at two sizes).

Acceptance is the one rule here that is not a count of rows: a device is **accepted** when every
non-retired requirement of its policy — every gate, multi-node ones through the device's topology
of that unit — has a `passed` projection row at the policy's current version. `ACCEPTANCE` is its
only definition; the overview, the site page and the device page all read it.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any
from uuid import UUID

from django.db.models import Count, Q

from fleet.burnin.models import PolicyProgress, TestExecution
from fleet.burnin.selectors import latest_execution_sql
from fleet.burnin.tables import sql
from fleet.core.exceptions import NotFoundError
from fleet.core.replica import read_connection
from fleet.inventory.models import Device, Site, Topology, TopologyMembership
from fleet.jobs.models import Job, JobDevice
from fleet.policies.models import AcceptancePolicy, Requirement, ThresholdRule
from fleet_rules.eligibility import enrolled_sql
from fleet_rules.evidence import RuleOutcome, rule_outcomes
from fleet_rules.resolution import Resolution, Rule, resolve
from fleet_rules.vocabulary import ExecutionStatus, RequirementScope, TopologyUnit, Verdict

NOT_PASSING = (Verdict.FAILED, Verdict.ERRORED)
UNIT_PLURALS: dict[str, str] = {
    TopologyUnit.NVLINK_DOMAIN: "domains",
    TopologyUnit.POD: "pods",
    TopologyUnit.RACK: "racks",
}

# --- acceptance ------------------------------------------------------------------------------------

ACCEPTANCE = sql(
    """
WITH required AS (
    SELECT p.resource_class, p.version, r.id, r.scope, r.unit
    FROM {requirement} r JOIN {policy} p ON p.id = r.policy_id
    WHERE r.retired_at IS NULL
), devices AS (
    SELECT d.id, d.site_id, d.resource_class FROM {device} d
    WHERE d.site_id = ANY(%(sites)s) AND (%(device)s::uuid IS NULL OR d.id = %(device)s) AND {enrolled}
), judged AS (
    SELECT devices.id, devices.site_id, devices.resource_class,
           count(required.id) AS required,
           count(pp.id) FILTER (WHERE pp.verdict = %(passed)s AND pp.policy_version = required.version) AS passed
    FROM devices
    LEFT JOIN required ON required.resource_class = devices.resource_class
    LEFT JOIN {membership} m
           ON required.scope = %(multi_node)s AND m.device_id = devices.id AND m.unit = required.unit
    LEFT JOIN {progress} pp
           ON pp.requirement_id = required.id
          AND pp.target_id = CASE WHEN required.scope = %(multi_node)s THEN m.topology_id ELSE devices.id END
    GROUP BY devices.id, devices.site_id, devices.resource_class
)
SELECT site_id, resource_class, count(*) AS enrolled,
       count(*) FILTER (WHERE required > 0 AND passed = required) AS accepted
FROM judged GROUP BY site_id, resource_class
""",
    policy=AcceptancePolicy._meta.db_table,
    enrolled=enrolled_sql("d"),
)


@dataclass(frozen=True)
class Acceptance:
    enrolled: int = 0
    accepted: int = 0

    @property
    def share(self) -> float:
        return self.accepted / self.enrolled if self.enrolled else 0.0

    def __add__(self, other: Acceptance) -> Acceptance:
        return Acceptance(self.enrolled + other.enrolled, self.accepted + other.accepted)


def acceptance(site_ids: Sequence[UUID], device_id: UUID | None = None) -> dict[tuple[UUID, str], Acceptance]:
    """(site, resource class) → enrolled devices and how many of them are accepted (one query)."""
    if not site_ids:
        return {}
    params = {
        "sites": list(site_ids),
        "device": device_id,
        "passed": Verdict.PASSED,
        "multi_node": RequirementScope.MULTI_NODE,
    }
    with read_connection().cursor() as cursor:
        cursor.execute(ACCEPTANCE, params)
        return {(site, rc): Acceptance(enrolled, accepted) for site, rc, enrolled, accepted in cursor.fetchall()}


def verdict_counts(site_ids: Sequence[UUID]) -> dict[UUID, dict[str, int]]:
    """Projection rows per site and verdict (one query)."""
    counts: dict[UUID, dict[str, int]] = defaultdict(lambda: dict.fromkeys(Verdict.values, 0))
    rows = (
        PolicyProgress.objects.filter(site_id__in=site_ids)
        .values_list("site_id", "verdict")
        .annotate(n=Count("id"))
        .order_by()
    )
    for site_id, verdict, n in rows:
        counts[site_id][verdict] = n
    return counts


# --- the site page ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class RequirementProgress:
    """One bar of the site page: a requirement's targets by verdict."""

    name: str
    gate: str
    scope: str
    unit: str | None
    counts: dict[str, int]

    @property
    def total(self) -> int:
        return sum(self.counts.values())

    @property
    def target_word(self) -> str:
        """What this requirement's targets are: devices, or racks (domains, pods)."""
        if self.scope == RequirementScope.MULTI_NODE and self.unit:
            plural = UNIT_PLURALS.get(self.unit, f"{self.unit}s")
        else:
            plural = "devices"
        return plural[:-1] if self.total == 1 else plural

    def share(self, verdict: str) -> float:
        return self.counts.get(verdict, 0) / self.total if self.total else 0.0


@dataclass(frozen=True)
class ClassProgress:
    resource_class: str
    policy_version: int | None
    acceptance: Acceptance
    gates: dict[str, list[RequirementProgress]]  # gate → bars, in requirement-name order


def site_progress(site: Site) -> list[ClassProgress]:
    """Per resource class at the site: acceptance, and a bar per requirement grouped by gate
    (four queries)."""
    by_class = acceptance([site.id])
    classes = sorted({rc for _, rc in by_class} | _projected_classes(site))
    policies = {p.resource_class: p for p in AcceptancePolicy.objects.filter(resource_class__in=classes)}
    requirements = list(
        Requirement.objects.filter(policy__resource_class__in=classes, retired_at__isnull=True)
        .select_related("policy")
        .order_by("gate", "name")
    )
    counts: dict[UUID, dict[str, int]] = defaultdict(lambda: dict.fromkeys(Verdict.values, 0))
    for requirement_id, verdict, n in (
        PolicyProgress.objects.filter(site=site)
        .values_list("requirement_id", "verdict")
        .annotate(n=Count("id"))
        .order_by()
    ):
        counts[requirement_id][verdict] = n
    result = []
    for rc in classes:
        gates: dict[str, list[RequirementProgress]] = defaultdict(list)
        for r in requirements:
            if r.policy.resource_class == rc:
                gates[r.gate].append(RequirementProgress(r.name, r.gate, r.scope, r.unit, dict(counts[r.id])))
        policy = policies.get(rc)
        result.append(
            ClassProgress(
                rc, policy.version if policy else None, by_class.get((site.id, rc), Acceptance()), dict(gates)
            )
        )
    return result


def _projected_classes(site: Site) -> set[str]:
    # `order_by()` clears the model's ordering, which Django would otherwise add to the DISTINCT
    # (every row's site, satellite, requirement and target: a sort of the whole projection).
    return set(PolicyProgress.objects.filter(site=site).order_by().values_list("resource_class", flat=True).distinct())


def site_resource_classes(site: Site) -> list[str]:
    """Every resource class with devices at the site (one query)."""
    return sorted(set(Device.objects.filter(site=site).order_by().values_list("resource_class", flat=True).distinct()))


# --- the grid ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class GridColumn:
    requirement_id: UUID
    name: str
    gate: str
    unit: str | None  # multi-node requirements name a topology unit


@dataclass(frozen=True)
class GridCell:
    requirement: str
    verdict: str  # a Verdict, or "" when the device has no target for the requirement (no topology)
    execution_id: UUID | None = None
    topology_label: str | None = None  # for multi-node requirements: the cohort the cell is the verdict of


@dataclass(frozen=True)
class GridRow:
    device_id: UUID
    hostname: str
    satellite: str
    topologies: dict[str, tuple[UUID, str]]  # unit → (id, label)
    cells: list[GridCell]


@dataclass(frozen=True)
class GridFilters:
    resource_class: str
    topology: str | None = None  # a topology label
    verdict: str | None = None
    satellite: str | None = None


@dataclass(frozen=True)
class GridPage:
    columns: list[GridColumn]
    rows: list[GridRow]
    next_after: str | None  # the hostname the next page starts after
    topologies: list[tuple[UUID, str, str]] = field(default_factory=list)  # (id, unit, label) at the site


def site_grid(site: Site, filters: GridFilters, *, after: str | None, limit: int) -> GridPage:
    """One page of the device × requirement grid, keyset-paginated by hostname (six queries)."""
    columns = [
        GridColumn(r.id, r.name, r.gate, r.unit if r.scope == RequirementScope.MULTI_NODE else None)
        for r in Requirement.objects.filter(
            policy__resource_class=filters.resource_class, retired_at__isnull=True
        ).order_by("gate", "name")
    ]
    devices_q = Device.objects.filter(site=site, resource_class=filters.resource_class).select_related("satellite")
    if filters.satellite:
        devices_q = devices_q.filter(satellite__name=filters.satellite)
    if filters.topology:
        devices_q = devices_q.filter(memberships__topology__label=filters.topology)
    if filters.verdict:
        with_verdict = PolicyProgress.objects.filter(site=site, verdict=filters.verdict)
        devices_q = devices_q.filter(
            Q(id__in=with_verdict.filter(device__isnull=False).values("device_id"))
            | Q(memberships__topology_id__in=with_verdict.filter(topology__isnull=False).values("topology_id"))
        )
    if after:
        devices_q = devices_q.filter(hostname__gt=after)
    devices = list(devices_q.distinct().order_by("hostname")[: limit + 1])
    has_more = len(devices) > limit
    devices = devices[:limit]
    memberships: dict[UUID, dict[str, tuple[UUID, str]]] = defaultdict(dict)
    for device_id, unit, topology_id, label in TopologyMembership.objects.filter(
        device_id__in=[d.id for d in devices]
    ).values_list("device_id", "unit", "topology_id", "topology__label"):
        memberships[device_id][unit] = (topology_id, label)
    targets = {d.id for d in devices} | {t for units in memberships.values() for t, _ in units.values()}
    rows_by_key = {
        (requirement_id, target_id): (verdict, execution_id)
        for requirement_id, target_id, verdict, execution_id in PolicyProgress.objects.filter(
            requirement_id__in=[c.requirement_id for c in columns], target_id__in=targets
        ).values_list("requirement_id", "target_id", "verdict", "execution_id")
    }
    grid_rows = []
    for device in devices:
        units = memberships.get(device.id, {})
        cells = []
        for column in columns:
            if column.unit is None:
                verdict, execution = rows_by_key.get((column.requirement_id, device.id), (Verdict.NOT_RUN, None))
                cells.append(GridCell(column.name, verdict, execution))
            elif column.unit in units:
                topology_id, label = units[column.unit]
                verdict, execution = rows_by_key.get((column.requirement_id, topology_id), (Verdict.NOT_RUN, None))
                cells.append(GridCell(column.name, verdict, execution, label))
            else:
                cells.append(GridCell(column.name, ""))
        grid_rows.append(GridRow(device.id, device.hostname, device.satellite.name, units, cells))
    topologies = list(Topology.objects.filter(site=site).order_by("unit", "label").values_list("id", "unit", "label"))
    return GridPage(columns, grid_rows, devices[-1].hostname if has_more and devices else None, topologies)


# --- failures --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class FailureFilters:
    resource_class: str | None = None
    requirement: str | None = None
    verdict: str | None = None
    satellite: str | None = None


#: How the failures list may be sorted: the key, and the columns it orders by.
FAILURE_ORDERS: dict[str, tuple[str, ...]] = {
    "newest": ("-execution__finished_at", "-id"),
    "oldest": ("execution__finished_at", "id"),
    "target": ("device__hostname", "topology__label", "requirement__name", "id"),
    "requirement": ("requirement__name", "device__hostname", "topology__label", "id"),
}


@dataclass(frozen=True)
class FailureRow:
    row_id: int
    target: str  # hostname, or the rack's label
    device_id: UUID | None
    topology_id: UUID | None
    resource_class: str
    requirement: str
    verdict: str
    execution_id: UUID | None
    finished_at: datetime | None
    rules: list[RuleOutcome]  # the failing ones
    error: str
    attempts: int  # executions of the target under the current policy version


def site_failures(
    site: Site, filters: FailureFilters, *, order: str = "newest", page: int = 0, limit: int = 100
) -> tuple[list[FailureRow], bool]:
    """Failed and errored targets with their failing rules (measured value, comparator, threshold,
    margin), the error of errored runs, and their attempts (two queries). Returns (rows, more)."""
    rows = PolicyProgress.objects.filter(site=site, verdict__in=NOT_PASSING).select_related(
        "requirement", "requirement__policy", "device", "topology", "execution", "execution__evaluation"
    )
    if filters.resource_class:
        rows = rows.filter(resource_class=filters.resource_class)
    if filters.requirement:
        rows = rows.filter(requirement__name=filters.requirement)
    if filters.verdict:
        rows = rows.filter(verdict=filters.verdict)
    if filters.satellite:
        rows = rows.filter(satellite__name=filters.satellite)
    chosen = list(rows.order_by(*FAILURE_ORDERS[order])[page * limit : (page + 1) * limit + 1])
    more = len(chosen) > limit
    chosen = chosen[:limit]
    attempts = attempts_under_current_version([(p.requirement_id, p.target_id, p.policy_version) for p in chosen])
    failures = []
    for p in chosen:
        execution = p.execution
        evaluation = getattr(execution, "evaluation", None) if execution is not None else None
        outcomes, error = [], ""
        if execution is not None and evaluation is not None:
            outcomes = [o for o in rule_outcomes(evaluation.metric_evaluations, execution.metrics) if not o.passed]
            # Why it could not judge (errored), or a failure no rule explains (e.g. no thresholds).
            error = execution.error or ("" if outcomes else evaluation.reason or "")
        failures.append(
            FailureRow(
                row_id=p.id,
                target=p.device.hostname if p.device is not None else (p.topology.label if p.topology else ""),
                device_id=p.device_id,
                topology_id=p.topology_id,
                resource_class=p.resource_class,
                requirement=p.requirement.name,
                verdict=p.verdict,
                execution_id=p.execution_id,
                finished_at=execution.finished_at if execution is not None else None,
                rules=outcomes,
                error=error,
                attempts=attempts.get((p.requirement_id, p.target_id), 0),
            )
        )
    return failures, more


def iter_site_failures(site: Site, filters: FailureFilters, *, order: str, chunk: int = 500) -> Iterator[FailureRow]:
    """Every failure, a bounded chunk of rows at a time (for the CSV download: memory stays flat)."""
    for page in range(1_000_000):
        rows, more = site_failures(site, filters, order=order, page=page, limit=chunk)
        yield from rows
        if not more:
            return


def attempts_under_current_version(targets: Sequence[tuple[UUID, UUID, int]]) -> dict[tuple[UUID, UUID], int]:
    """(requirement, target) → how many executions it had that were planned under the given
    policy version (the version a job carries in its parameters), in one query."""
    if not targets:
        return {}
    wanted = {(requirement, target): version for requirement, target, version in targets}
    counts: dict[tuple[UUID, UUID], int] = defaultdict(int)
    rows = (
        TestExecution.objects.filter(requirement_id__in={r for r, _ in wanted}, diagnostic=False)
        .filter(Q(device_id__in={t for _, t in wanted}) | Q(topology_id__in={t for _, t in wanted}))
        .values_list("requirement_id", "device_id", "topology_id", "job__parameters__policy_version")
        .annotate(n=Count("id"))
        .order_by()
    )
    for requirement_id, device_id, topology_id, version, n in rows:
        key = (requirement_id, device_id or topology_id)
        if key in wanted and version == wanted[key]:
            counts[key] += n
    return counts


# --- one device ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class RequirementVerdict:
    name: str
    gate: str
    target: str  # the device's hostname, or its rack's label for a multi-node requirement
    verdict: str
    execution_id: UUID | None
    policy_version: int | None


@dataclass(frozen=True)
class Attempt:
    execution_id: UUID
    requirement: str
    target: str
    status: str
    verdict: str | None  # passed/failed/errored once evaluated
    started_at: datetime | None
    finished_at: datetime | None
    job_id: UUID | None


@dataclass(frozen=True)
class DeviceJob:
    job_id: UUID
    workflow_name: str
    status: str
    created_at: datetime
    requirements: list[str]


@dataclass(frozen=True)
class DeviceDetail:
    device: Device
    topologies: list[Topology]
    policy_version: int | None
    accepted: bool
    requirements: list[RequirementVerdict]
    attempts: list[Attempt]
    jobs: list[DeviceJob]


HISTORY_LIMIT = 200


def device_detail(site: Site, hostname: str) -> DeviceDetail:
    """Everything about one device: identity, each requirement's verdict and deciding execution,
    every attempt (the newest 200), and the jobs that held it (the newest 50); eight queries."""
    device = Device.objects.select_related("site", "satellite").filter(site=site, hostname=hostname).first()
    if device is None:
        raise NotFoundError(f"No device {hostname!r} at site {site.slug}.")
    topologies = list(Topology.objects.filter(memberships__device=device).order_by("unit"))
    by_unit = {t.unit: t for t in topologies}
    policy = AcceptancePolicy.objects.filter(resource_class=device.resource_class).first()
    requirements = list(
        Requirement.objects.filter(policy=policy, retired_at__isnull=True).order_by("gate", "name") if policy else []
    )
    targets = [device.id, *(t.id for t in topologies)]
    rows = {
        (p.requirement_id, p.target_id): p
        for p in PolicyProgress.objects.filter(requirement__in=requirements, target_id__in=targets)
    }
    verdicts = []
    for r in requirements:
        target = by_unit.get(r.unit) if r.scope == RequirementScope.MULTI_NODE and r.unit else None
        row = rows.get((r.id, target.id if target else device.id))
        verdicts.append(
            RequirementVerdict(
                r.name,
                r.gate,
                target.label if target else device.hostname,
                row.verdict if row else Verdict.NOT_RUN,
                row.execution_id if row else None,
                row.policy_version if row else None,
            )
        )
    executions = (
        TestExecution.objects.filter(Q(device=device) | Q(topology__in=topologies))
        .select_related("requirement", "evaluation", "topology")
        .order_by("-created_at", "-id")[:HISTORY_LIMIT]
    )
    attempts = [
        Attempt(
            e.id,
            e.requirement.name,
            e.topology.label if e.topology else device.hostname,
            e.status,
            _attempt_verdict(e),
            e.started_at,
            e.finished_at,
            e.job_id,
        )
        for e in executions
    ]
    jobs = [
        DeviceJob(j.id, j.workflow_name, j.status, j.created_at, j.requirement_names)
        for j in Job.objects.filter(id__in=JobDevice.objects.filter(device=device).values("job_id")).order_by(
            "-created_at"
        )[:50]
    ]
    accepted = acceptance([site.id], device.id).get((site.id, device.resource_class), Acceptance()).accepted == 1
    return DeviceDetail(device, topologies, policy.version if policy else None, accepted, verdicts, attempts, jobs)


def _attempt_verdict(execution: TestExecution) -> str | None:
    if execution.status == ExecutionStatus.ERRORED:
        return Verdict.ERRORED
    evaluation = getattr(execution, "evaluation", None)
    if evaluation is None:
        return None
    return Verdict.PASSED if evaluation.passed else Verdict.FAILED


# --- the evidence of one execution ----------------------------------------------------------------


@dataclass(frozen=True)
class EvidenceRule:
    outcome: RuleOutcome | None  # None: the rule was not in the evaluation (e.g. evaluated under older thresholds)
    rule: Rule  # the resolved rule it is judged against now
    site_override: bool


@dataclass(frozen=True)
class ExecutionEvidence:
    execution: TestExecution
    resolution: Resolution
    rules: list[EvidenceRule]
    extra_outcomes: list[RuleOutcome]  # in the evaluation, but no longer in the resolution
    policy_version: int
    evaluation_is_current: bool


def execution_evidence(execution_id: UUID) -> ExecutionEvidence:
    """An execution with its evaluation, rule by rule against the resolved thresholds (two queries)."""
    execution = (
        TestExecution.objects.select_related(
            "requirement", "requirement__policy", "device", "topology", "site", "evaluation", "job"
        )
        .filter(id=execution_id)
        .first()
    )
    if execution is None:
        raise NotFoundError(f"No execution {execution_id}.")
    rules = [
        Rule(t.metric, t.statistic, t.comparator, t.threshold, t.site_id)
        for t in ThresholdRule.objects.filter(requirement_id=execution.requirement_id).filter(
            Q(site__isnull=True) | Q(site_id=execution.site_id)
        )
    ]
    resolution = resolve(rules, execution.site_id)
    overridden = {(r.metric, r.statistic) for r in rules if r.site_id is not None}
    evaluation = getattr(execution, "evaluation", None)
    outcomes = {
        (o.metric, o.statistic): o
        for o in (rule_outcomes(evaluation.metric_evaluations, execution.metrics) if evaluation else [])
    }
    resolved = [Rule(r["metric"], r["statistic"], r["comparator"], r["threshold"]) for r in resolution.rules]
    evidence_rules = [
        EvidenceRule(outcomes.pop((r.metric, r.statistic), None), r, (r.metric, r.statistic) in overridden)
        for r in resolved
    ]
    current = evaluation is not None and (
        evaluation.evaluation_source_key == resolution.key and evaluation.execution_updated_at == execution.updated_at
    )
    return ExecutionEvidence(
        execution, resolution, evidence_rules, list(outcomes.values()), execution.requirement.policy.version, current
    )


# --- a metric across the fleet -------------------------------------------------------------------------


@dataclass(frozen=True)
class MetricPoint:
    target: str
    execution_id: UUID
    value: float
    passed: bool | None  # the rule's outcome in the evaluation, when evaluated


@dataclass(frozen=True)
class MetricPicture:
    resource_class: str
    requirement: str
    rule: Rule
    unit: str
    points: list[MetricPoint]


_LATEST_METRICS = sql(
    """
SELECT t.requirement_id, t.label, x.id, x.metrics, ev.metric_evaluations
FROM unnest(%(requirements)s::uuid[], %(devices)s::uuid[], %(topologies)s::uuid[], %(labels)s::text[])
     AS t(requirement_id, device_id, topology_id, label)
CROSS JOIN LATERAL {latest} x
LEFT JOIN {evaluation} ev ON ev.execution_id = x.id
WHERE x.status = %(completed)s
""",
    latest=latest_execution_sql("t", "e.id, e.metrics, e.status"),
)


def metric_pictures(site: Site, requirement_name: str) -> list[MetricPicture]:
    """For each resource class whose policy has this requirement: every thresholded metric's latest
    value on every target at the site (four queries)."""
    requirements = list(
        Requirement.objects.filter(name=requirement_name, retired_at__isnull=True).select_related("policy")
    )
    if not requirements:
        raise NotFoundError(f"No requirement {requirement_name!r}.")
    rules = defaultdict(list)
    for t in ThresholdRule.objects.filter(requirement__in=requirements).filter(Q(site__isnull=True) | Q(site=site)):
        rules[t.requirement_id].append(Rule(t.metric, t.statistic, t.comparator, t.threshold, t.site_id))
    devices = list(
        Device.objects.filter(site=site, resource_class__in=[r.policy.resource_class for r in requirements])
        .exclude(enrolled_at__isnull=True)
        .values_list("id", "hostname", "resource_class")
    )
    topologies = list(
        Topology.objects.filter(site=site)
        .values_list("id", "unit", "label", "memberships__device__resource_class")
        .distinct()
    )
    columns: dict[str, list[Any]] = {"requirements": [], "devices": [], "topologies": [], "labels": []}
    for r in requirements:
        chosen: list[tuple[UUID | None, UUID | None, str]]
        if r.scope == RequirementScope.SINGLE_NODE:
            chosen = [(d, None, host) for d, host, rc in devices if rc == r.policy.resource_class]
        else:
            chosen = [
                (None, t, label)
                for t, unit, label, rc in topologies
                if unit == r.unit and rc == r.policy.resource_class
            ]
        for device_id, topology_id, label in chosen:
            columns["requirements"].append(r.id)
            columns["devices"].append(device_id)
            columns["topologies"].append(topology_id)
            columns["labels"].append(label)
    with read_connection().cursor() as cursor:
        cursor.execute(_LATEST_METRICS, columns | {"completed": ExecutionStatus.COMPLETED})
        latest = cursor.fetchall()
    pictures = []
    for r in requirements:
        resolved = resolve(rules[r.id], site.id)
        for rule in resolved.rules:
            metric, statistic = rule["metric"], rule["statistic"]
            points, unit = [], ""
            for requirement_id, label, execution_id, metrics, evaluations in latest:
                if requirement_id != r.id:
                    continue
                outcome = next(
                    (
                        o
                        for o in rule_outcomes(_json(evaluations) or {}, _json(metrics) or {})
                        if (o.metric, o.statistic) == (metric, statistic)
                    ),
                    None,
                )
                reading = (_json(metrics) or {}).get(metric) or {}
                value = reading.get("value") if statistic is None else (reading.get("statistics") or {}).get(statistic)
                unit = unit or str(reading.get("unit") or "")
                if isinstance(value, int | float) and not isinstance(value, bool):
                    points.append(MetricPoint(label, execution_id, float(value), outcome.passed if outcome else None))
            pictures.append(
                MetricPicture(
                    r.policy.resource_class,
                    r.name,
                    Rule(metric, statistic, rule["comparator"], rule["threshold"]),
                    unit,
                    sorted(points, key=lambda p: p.value),
                )
            )
    return pictures


def _json(value: Any) -> Any:
    # Django hands jsonb to psycopg as text so JSONField can decode it; raw queries must too.
    return json.loads(value) if isinstance(value, str) else value


def executions_of_job(job_id: UUID) -> list[Attempt]:
    """The executions a job reported, with their verdict once evaluated (one query)."""
    return [
        Attempt(
            e.id,
            e.requirement.name,
            e.device.hostname if e.device else (e.topology.label if e.topology else ""),
            e.status,
            _attempt_verdict(e),
            e.started_at,
            e.finished_at,
            e.job_id,
        )
        for e in TestExecution.objects.filter(job_id=job_id)
        .select_related("requirement", "evaluation", "device", "topology")
        .order_by("created_at", "id")[:HISTORY_LIMIT]
    ]
