"""Attempt history under the current policy version: per target, its executions since the policy's
version last rose (`AcceptancePolicy.version_changed_at`) and their verdicts; the passes that
came after failures ("passed after N attempts"); and each requirement's flaky rate at a site
(targets whose verdict changed between attempts without a policy change). Each read is a fixed
number of queries; the rules are `fleet_rules.attempts`.

An attempt's verdict is its evaluation's, when that evaluation is for the execution's current
`updated_at` (`errored` for an errored execution); a running or unevaluated attempt has none and
is not counted.

The site-wide figures (passes after failures here, flaky rates on the site page:
`fleet.burnin.reads.site`) read the outcomes the reconcile keeps on each projection row
(`PolicyProgress.outcomes`, from the target's whole counted history when it writes the row), so
they cost the site's targets, not its history; they are as of the reconcile, like every count of
the projection. One target's history is read from its attempts.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import NamedTuple
from uuid import UUID, uuid4

from django.db import connection
from django.db.models import Max

from fleet.burnin.fragments import counted_attempt_sql
from fleet.burnin.models import TestExecution
from fleet.burnin.tables import sql
from fleet.core.exceptions import NotFoundError
from fleet.core.statements import Statement
from fleet.inventory.models import Device, Site, Topology
from fleet.lifecycle.models import Repair
from fleet.policies.models import AcceptancePolicy, Requirement
from fleet_rules.attempts import Attempt, AttemptSummary, judged, not_passed_sql, summarise
from fleet_rules.vocabulary import RequirementScope, Verdict

#: Attempts under the current policy version and, on a device, since its last repair.
_SINCE = counted_attempt_sql("e", "pol")


class HistoryRow(NamedTuple):
    """One attempt of a (requirement, target), in order; `passed` only when its evaluation is
    for the execution's current `updated_at`."""

    requirement_id: UUID
    target_id: UUID
    status: str
    passed: bool | None


HISTORIES = Statement(
    "burnin.diagnosis.attempt_histories",
    sql(
        """
SELECT t.requirement_id, t.target_id, h.status, h.passed
FROM unnest(%(requirements)s::uuid[], %(targets)s::uuid[]) AS t(requirement_id, target_id)
JOIN {requirement} r ON r.id = t.requirement_id
JOIN {policy} pol ON pol.id = r.policy_id
CROSS JOIN LATERAL (
    SELECT e.created_at, e.id, e.status,
           CASE WHEN ev.execution_updated_at = e.updated_at THEN ev.passed END AS passed
    FROM {execution} e LEFT JOIN {evaluation} ev ON ev.execution_id = e.id
    WHERE e.requirement_id = t.requirement_id AND (e.device_id = t.target_id OR e.topology_id = t.target_id)
      AND NOT e.diagnostic AND {since}
) h
ORDER BY t.requirement_id, t.target_id, h.created_at, h.id
""",
        policy=AcceptancePolicy._meta.db_table,
        since=_SINCE,
    ),
    HistoryRow,
    example=lambda: {"requirements": [uuid4(), uuid4()], "targets": [uuid4(), uuid4()]},
)


def attempt_summaries(targets: Sequence[tuple[UUID, UUID]]) -> dict[tuple[UUID, UUID], AttemptSummary]:
    """(requirement, target) → what its attempts under the current version say (one query)."""
    if not targets:
        return {}
    histories: dict[tuple[UUID, UUID], list[Attempt]] = defaultdict(list)
    with connection.cursor() as cursor:
        rows = HISTORIES.rows(cursor, {"requirements": [r for r, _ in targets], "targets": [t for _, t in targets]})
    for row in rows:
        histories[(row.requirement_id, row.target_id)].append(Attempt(row.status, judged(row.status, row.passed)))
    return {key: summarise(histories.get(key, [])) for key in targets}


@dataclass(frozen=True)
class PassedAfter:
    """A target that passed after failing or erroring under the current version."""

    target: str
    device_id: UUID | None
    topology_id: UUID | None
    resource_class: str
    requirement: str
    execution_id: UUID | None
    summary: AttemptSummary


class PassedAfterRow(NamedTuple):
    requirement_id: UUID
    target_id: UUID
    device_id: UUID | None
    topology_id: UUID | None
    label: str  # the device's hostname or the topology's label
    resource_class: str
    name: str  # the requirement's
    execution_id: UUID | None


# The projection's passed rows at the current version whose counted attempts held a failure or an
# error (`PolicyProgress.outcomes`, written with the row): a partial index holds exactly those, so
# the read costs the passes after failures, not the site's history (a scan of every attempt took
# 0.9 s at 100,000 devices).
PASSED_AFTER = Statement(
    "burnin.diagnosis.passed_after",
    sql(
        """
SELECT p.requirement_id, p.target_id, p.device_id, p.topology_id, coalesce(d.hostname, t.label) AS label,
       p.resource_class, r.name, p.execution_id
FROM {progress} p
JOIN {requirement} r ON r.id = p.requirement_id
JOIN {policy} pol ON pol.id = r.policy_id
LEFT JOIN LATERAL (SELECT d.hostname FROM {device} d WHERE d.id = p.device_id) d ON true
LEFT JOIN LATERAL (SELECT t.label FROM {topology} t WHERE t.id = p.topology_id) t ON true
WHERE p.site_id = %(site)s AND p.verdict = %(passed)s AND {not_passed} AND p.policy_version = pol.version
  AND r.retired_at IS NULL
ORDER BY r.name, coalesce(d.hostname, t.label)
LIMIT %(limit)s
""",
        policy=AcceptancePolicy._meta.db_table,
        not_passed=not_passed_sql("p.outcomes"),
    ),
    PassedAfterRow,
    example=lambda: {"site": uuid4(), "passed": Verdict.PASSED, "limit": 200},
)


def passes_after_failures(site: Site, *, limit: int = 200) -> list[PassedAfter]:
    """Targets at the site whose passed row follows failures or errors under the current
    version, with their attempt summaries (two queries)."""
    with connection.cursor() as cursor:
        rows = PASSED_AFTER.rows(cursor, {"site": site.id, "passed": Verdict.PASSED, "limit": limit})
    summaries = attempt_summaries([(row.requirement_id, row.target_id) for row in rows])
    return [
        PassedAfter(
            target=row.label,
            device_id=row.device_id,
            topology_id=row.topology_id,
            resource_class=row.resource_class,
            requirement=row.name,
            execution_id=row.execution_id,
            summary=summaries[(row.requirement_id, row.target_id)],
        )
        for row in rows
    ]


@dataclass(frozen=True)
class FlakyRate:
    flaky: int  # targets whose verdict changed between attempts
    judged: int  # targets with at least one judged attempt

    @property
    def share(self) -> float:
        return self.flaky / self.judged if self.judged else 0.0


def device_page_attempts(device: Device, topologies: Sequence[Topology]) -> dict[str, AttemptSummary]:
    """requirement name → the attempt summary of its target for one device (the device itself,
    or its topology of the requirement's unit): two queries."""
    by_unit = {t.unit: t.id for t in topologies}
    targets: dict[tuple[UUID, UUID], str] = {}
    for r in Requirement.objects.filter(policy__resource_class=device.resource_class, retired_at__isnull=True).only(
        "id", "name", "scope", "unit"
    ):
        target = by_unit.get(r.unit) if r.scope == RequirementScope.MULTI_NODE and r.unit else device.id
        if target is not None:
            targets[(r.id, target)] = r.name
    return {targets[key]: summary for key, summary in attempt_summaries(list(targets)).items()}


@dataclass(frozen=True)
class AttemptRow:
    execution_id: UUID
    status: str
    verdict: Verdict | None
    created_at: datetime
    finished_at: datetime | None
    job_id: UUID | None


@dataclass(frozen=True)
class TargetAttempts:
    requirement: str
    target_id: UUID
    target: str  # hostname or label
    policy_version: int
    consecutive_passes_required: int
    attempts: list[AttemptRow]  # oldest first
    summary: AttemptSummary


def target_attempts(*, site: Site, requirement_name: str, target_id: UUID) -> TargetAttempts:
    """One target's attempts under the current policy version, oldest first, with their summary
    (404 for a target not at the site or a requirement that does not judge it). Four queries."""
    device = Device.objects.filter(id=target_id, site=site).first()
    topology = None if device is not None else Topology.objects.filter(id=target_id, site=site).first()
    if device is None and topology is None:
        raise NotFoundError(f"No device or topology {target_id} at site {site.slug}.")
    requirements = Requirement.objects.select_related("policy").filter(name=requirement_name, retired_at__isnull=True)
    if device is not None:
        requirement = requirements.filter(
            scope=RequirementScope.SINGLE_NODE, policy__resource_class=device.resource_class
        ).first()
    else:
        assert topology is not None
        classes = Device.objects.filter(memberships__topology=topology).values("resource_class")
        requirement = requirements.filter(
            scope=RequirementScope.MULTI_NODE, unit=topology.unit, policy__resource_class__in=classes
        ).first()
    if requirement is None:
        raise NotFoundError(f"No active requirement {requirement_name!r} judges this target.")
    since = requirement.policy.version_changed_at
    executions = TestExecution.objects.filter(requirement=requirement, diagnostic=False).select_related("evaluation")
    executions = executions.filter(device=device) if device is not None else executions.filter(topology=topology)
    if since is not None:
        executions = executions.filter(created_at__gte=since)
    if device is not None:  # a repaired device starts a new count (`fragments.counted_attempt_sql`)
        repaired = Repair.objects.filter(device=device).aggregate(last=Max("created_at"))["last"]
        if repaired is not None:
            executions = executions.filter(created_at__gt=repaired)
    rows = []
    for e in executions.order_by("created_at", "id"):
        evaluation = getattr(e, "evaluation", None)
        passed = (
            evaluation.passed if evaluation is not None and evaluation.execution_updated_at == e.updated_at else None
        )
        rows.append(AttemptRow(e.id, e.status, judged(e.status, passed), e.created_at, e.finished_at, e.job_id))
    return TargetAttempts(
        requirement=requirement.name,
        target_id=target_id,
        target=device.hostname if device is not None else topology.label if topology is not None else "",
        policy_version=requirement.policy.version,
        consecutive_passes_required=requirement.consecutive_passes,
        attempts=rows,
        summary=summarise([Attempt(r.status, r.verdict) for r in rows]),
    )
