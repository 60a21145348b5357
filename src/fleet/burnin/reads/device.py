"""One device (`/sites/<slug>/devices/<hostname>/`): identity, acceptance, each requirement's
verdict with its attempts, every attempt, the jobs that held it, its certificates, diagnoses and
where it is an outlier."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from uuid import UUID

from django.db.models import F, Q

from fleet.burnin.certificates.reads import DeviceCertificates, device_certificates_summary
from fleet.burnin.diagnosis.attempts import device_page_attempts
from fleet.burnin.diagnosis.isolation import site_diagnoses
from fleet.burnin.diagnosis.outliers import Group, device_outliers, site_outlier_groups
from fleet.burnin.fingerprints import FingerprintHistory, fingerprint_history, read_after, snapshots_seen_since
from fleet.burnin.models import DeviceDiagnosis, PolicyProgress, RemedyStep, TestExecution
from fleet.burnin.reads.acceptance import Acceptance, acceptance
from fleet.burnin.reads.cohorts import cohort_blockers
from fleet.burnin.reads.outcomes import job_outcomes
from fleet.core.exceptions import NotFoundError
from fleet.inventory.models import Device, Site, Topology
from fleet.inventory.selectors import site_by_slug
from fleet.jobs.models import Job, JobDevice
from fleet.lifecycle.models import Repair
from fleet.lifecycle.reads import DeviceLifecycle, device_lifecycle
from fleet.policies.models import AcceptancePolicy, Requirement
from fleet_rules.attempts import AttemptSummary
from fleet_rules.eligibility import is_burn_in_eligible, is_enrolled
from fleet_rules.evidence import rule_outcomes
from fleet_rules.fingerprint import PartCheck, repair_check
from fleet_rules.health_evidence import XidEvent, fatal_events
from fleet_rules.jobs import JobOutcome
from fleet_rules.readable import metric_unit, outcome_text
from fleet_rules.vocabulary import ExecutionStatus, RequirementScope, Verdict

HISTORY_LIMIT = 200


@dataclass(frozen=True)
class RequirementVerdict:
    name: str
    gate: str
    target: str  # the device's hostname, or its rack's label for a multi-node requirement
    verdict: str  # "" when the device is no target of it (not enrolled, or in no topology of its unit)
    execution_id: UUID | None
    policy_version: int | None
    blocked: str = ""  # a rack that has not run: who blocks it ("blocked: a03-n04 failed nccl-in-node")
    #: Why its deciding execution did not pass, as the failures list says it: the failing rules'
    #: outcomes in words (measured against the threshold, with units), or the run's error.
    why: tuple[str, ...] = ()
    #: The metric its picture opens on: the first failing rule's (`hbm_bandwidth_tbps.min`), or "".
    metric: str = ""


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
    outcome: JobOutcome  # what its tests found ("finished — 2 of 2 tests failed")


@dataclass(frozen=True)
class DeviceDetail:
    device: Device
    topologies: list[Topology]
    policy_version: int | None
    accepted: bool
    requirements: list[RequirementVerdict]
    attempts: list[Attempt]
    jobs: list[DeviceJob]
    enrolled: bool  # a burn-in target at all (a staged spare is not)
    eligible: bool  # burn-in may run on it (enrolled, in a burn-in state)
    gpu_vendor: str = ""  # who made its GPUs: its class's policy's (empty without a policy)


def device_detail(site: Site, hostname: str) -> DeviceDetail:
    """Everything about one device: identity, each requirement's verdict and deciding execution,
        every attempt (the newest 200), and the jobs that held it (the newest 50) and what they
    came to, and who blocks its racks that have not run (`cohort_blockers`); eleven queries."""
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
        for p in PolicyProgress.objects.filter(requirement__in=requirements, target_id__in=targets).select_related(
            "execution", "execution__evaluation"
        )
    }
    enrolled = is_enrolled(enrolled_at=device.enrolled_at, state=device.state)
    targets_of = {
        r.id: (by_unit.get(r.unit) if r.scope == RequirementScope.MULTI_NODE and r.unit else None) for r in requirements
    }
    waiting = [
        (t.id, device.resource_class)
        for r in requirements
        if (t := targets_of[r.id]) is not None and enrolled and _verdict(rows.get((r.id, t.id))) == Verdict.NOT_RUN
    ]
    blocked = cohort_blockers(waiting)
    verdicts = []
    for r in requirements:
        target = targets_of[r.id]
        multi = r.scope == RequirementScope.MULTI_NODE
        row = rows.get((r.id, target.id if target else device.id))
        is_target = enrolled and (target is not None or not multi)
        why = blocked.get((target.id, device.resource_class)) if target is not None and is_target else None
        failing = _failing(r, row) if row is not None and is_target else []
        verdicts.append(
            RequirementVerdict(
                r.name,
                r.gate,
                target.label if target else device.hostname,
                _verdict(row) if is_target else "",
                row.execution_id if row and is_target else None,
                row.policy_version if row and is_target else None,
                why.text if why else "",
                tuple(text for _, text in failing),
                failing[0][0] if failing and failing[0][0] else "",
            )
        )
    # A rack's runs are this device's attempts only if it took part: its job held the device (or,
    # for a run reported without a job, the device was enrolled by then).
    took_part = Q(job_id__in=JobDevice.objects.filter(device=device).values("job_id"))
    if device.enrolled_at is not None:
        took_part |= Q(job__isnull=True, created_at__gte=device.enrolled_at)
    executions = (
        TestExecution.objects.filter(Q(device=device) | (Q(topology__in=topologies) & took_part))
        .select_related("requirement", "evaluation", "topology")
        # Newest first by when it started (what the page shows), then by when it was reported.
        .order_by(F("started_at").desc(nulls_last=True), "-created_at", "-id")[:HISTORY_LIMIT]
    )
    attempts = [
        Attempt(
            e.id,
            e.requirement.name,
            e.topology.label if e.topology else device.hostname,
            e.status,
            attempt_verdict(e),
            e.started_at,
            e.finished_at,
            e.job_id,
        )
        for e in executions
    ]
    held = list(
        Job.objects.filter(id__in=JobDevice.objects.filter(device=device).values("job_id"))
        .prefetch_related("job_devices")
        .order_by("-created_at")[:50]
    )
    outcomes = job_outcomes(held)
    jobs = [DeviceJob(j.id, j.workflow_name, j.status, j.created_at, j.requirement_names, outcomes[j.id]) for j in held]
    accepted = acceptance([site.id], device.id).get((site.id, device.resource_class), Acceptance()).accepted == 1
    return DeviceDetail(
        device,
        topologies,
        policy.version if policy else None,
        accepted,
        verdicts,
        attempts,
        jobs,
        enrolled,
        is_burn_in_eligible(enrolled_at=device.enrolled_at, state=device.state),
        policy.gpu_vendor if policy else "",
    )


def _failing(requirement: Requirement, row: PolicyProgress) -> list[tuple[str, str]]:
    """(metric name, words) for each rule the row's deciding execution failed — the failures
    list's wording (`fleet_rules.readable.outcome_text`) — or ("", the error) for an errored run."""
    execution = row.execution
    if row.verdict not in (Verdict.FAILED, Verdict.ERRORED) or execution is None:
        return []
    evaluation = getattr(execution, "evaluation", None)
    outcomes = (
        [o for o in rule_outcomes(evaluation.metric_evaluations, execution.metrics) if not o.passed]
        if evaluation
        else []
    )
    declared = requirement.metric_units
    failing = [
        (o.name, outcome_text(o, metric_unit(execution.metrics, o.metric, declared.get(o.metric, ""))))
        for o in outcomes
    ]
    if not failing and (execution.error or (evaluation and evaluation.reason)):
        failing = [("", execution.error or (evaluation.reason if evaluation else ""))]
    return failing


def _verdict(row: PolicyProgress | None) -> str:
    return row.verdict if row is not None else Verdict.NOT_RUN


def attempt_verdict(execution: TestExecution) -> str | None:
    """An execution's verdict once evaluated (errored runs are errored whatever the evaluation)."""
    if execution.status == ExecutionStatus.ERRORED:
        return Verdict.ERRORED
    evaluation = getattr(execution, "evaluation", None)
    if evaluation is None:
        return None
    return Verdict.PASSED if evaluation.passed else Verdict.FAILED


@dataclass(frozen=True)
class DevicePageRead:
    site: Site
    detail: DeviceDetail
    certificates: DeviceCertificates | None  # None: not asked for (the viewer may not see them)
    attempts: dict[str, AttemptSummary]  # requirement name → its target's attempts
    diagnoses: list[DeviceDiagnosis]
    outliers: list[tuple[Group, float]]  # the groups the device is an outlier in, with its robust z
    lifecycle: DeviceLifecycle  # its newest state changes and repairs
    fatal_health: list[FatalHealth]  # its newest burn-in windows that logged a fatal Xid
    #: Its hardware fingerprints, newest first (None: not asked for, the viewer may not see them).
    fingerprints: FingerprintHistory | None = None
    #: Each shown repair's parts against the first fingerprint read after it (repair id → checks).
    repair_checks: dict[UUID, list[PartCheck]] = field(default_factory=dict)
    #: The remediation ladder's newest steps (docs/remediation.md), oldest first.
    remedies: list[RemedyStep] = field(default_factory=list)


#: How many of a device's remediation steps its page lists.
REMEDIES_SHOWN = 10


def device_remedies(device_id: UUID) -> list[RemedyStep]:
    """The device's newest remediation ladder steps, oldest first (one query, bounded)."""
    newest = list(RemedyStep.objects.filter(device_id=device_id).order_by("-created_at", "-id")[:REMEDIES_SHOWN])
    return newest[::-1]


#: How many of a device's windows with a fatal Xid its page lists.
FATAL_HEALTH_SHOWN = 5


@dataclass(frozen=True)
class FatalHealth:
    """A burn-in window of the device that logged a fatal Xid: the execution and its fatal events."""

    execution_id: UUID
    requirement: str
    reported_at: datetime
    fatal: list[XidEvent]


def device_fatal_health(device_id: UUID) -> list[FatalHealth]:
    """The device's newest executions whose health evidence holds a fatal Xid (one query, bounded)."""
    rows = (
        TestExecution.objects.filter(device_id=device_id, health__isnull=False, fatal_xids__gt=0)
        .select_related("requirement")
        .only("id", "created_at", "health", "requirement__name")
        .order_by("-created_at", "-id")[:FATAL_HEALTH_SHOWN]
    )
    return [FatalHealth(e.id, e.requirement.name, e.created_at, fatal_events(e.health)) for e in rows]


def device_page(
    slug: str, hostname: str, *, with_certificates: bool, with_fingerprints: bool = False
) -> DevicePageRead:
    """The device page: the site, the device's detail (eight queries), its certificates (one, when
    asked), attempts (two), diagnoses (one), outliers (three), lifecycle (two), its windows with a
    fatal Xid (one), its remediation steps (one) and fingerprints (one, when asked; one more to check the shown
    repairs against them)."""
    site = site_by_slug(slug)
    detail = device_detail(site, hostname)
    device = detail.device
    lifecycle = device_lifecycle(device.id)
    return DevicePageRead(
        site=site,
        detail=detail,
        certificates=device_certificates_summary(device.id) if with_certificates else None,
        attempts=device_page_attempts(device, detail.topologies),
        diagnoses=site_diagnoses(site=site, device_id=device.id),
        outliers=device_outliers(site_outlier_groups(site=site, resource_class=device.resource_class), device.id),
        lifecycle=lifecycle,
        fatal_health=device_fatal_health(device.id),
        fingerprints=fingerprint_history(device.id) if with_fingerprints else None,
        repair_checks=repair_checks(device.id, lifecycle.repairs) if with_fingerprints else {},
        remedies=device_remedies(device.id),
    )


def repair_checks(device_id: UUID, repairs: Sequence[Repair]) -> dict[UUID, list[PartCheck]]:
    """Each repair's parts against the first fingerprint the device reported after it (one query
    for all of them; none without repairs)."""
    if not repairs:
        return {}
    snapshots = snapshots_seen_since(device_id, min(r.created_at for r in repairs))
    return {r.id: repair_check(r.parts, read_after(snapshots, r.created_at)) for r in repairs}
