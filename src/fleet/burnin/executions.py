"""Execution reporting: idempotent create/update of a TestExecution under the agent's id.

`updated_at` moves on every real change and never on an identical replay, strictly forward
(evaluations are computed for one `updated_at`, so two writes must never share one).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any
from uuid import UUID

from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction
from django.db.models import F, Value
from django.db.models.functions import Greatest
from django.utils import timezone

from fleet.burnin.fingerprints import Observation, fingerprint_observe
from fleet.burnin.health import collective_burst, collective_xids_judge, fatal_xid_count, fatal_xids_judge
from fleet.burnin.models import TestExecution
from fleet.inventory.identity import Actor, ensure_reaches, reach
from fleet.inventory.models import Device, Topology
from fleet.jobs.models import Job
from fleet.policies.models import Requirement
from fleet_rules.health_evidence import XidEvent, xid_events
from fleet_rules.vocabulary import FINISHED_EXECUTION_STATUSES, ExecutionStatus, RequirementScope
from fleet_rules.xid_correlation import JobBurst

#: Fields an agent may change by reporting again; everything else identifies the execution.
MUTABLE_FIELDS = ("status", "parameters", "metrics", "error", "started_at", "finished_at", "job_id", "health")


@dataclass(frozen=True)
class ExecutionReport:
    requirement: str | None
    test: str | None
    device_id: UUID | None
    topology_id: UUID | None
    job_id: UUID | None
    status: str
    parameters: dict[str, Any]
    metrics: dict[str, Any]
    error: str
    started_at: datetime | None
    finished_at: datetime | None
    #: The window's health evidence (validated, JSON-ready), or None: a report without one keeps
    #: what is stored.
    health: dict[str, Any] | None = None
    #: The device's hardware fingerprint (`fleet_rules.fingerprint`); single-device executions only.
    inventory: dict[str, Any] | None = None
    #: Each member node's window of a multi-node execution (device id, validated health), or None.
    member_health: list[tuple[UUID, dict[str, Any]]] | None = None


@dataclass(frozen=True)
class ReportOutcome:
    execution: TestExecution
    created: bool
    changed: tuple[str, ...] = ()  # the fields an update changed


def next_updated_at(previous: datetime | None, now: datetime) -> datetime:
    """Now, or one microsecond after the previous value when the clock has not moved past it."""
    if previous is not None and now <= previous:
        return previous + timedelta(microseconds=1)
    return now


@dataclass(frozen=True)
class ReportTarget:
    """What an execution runs on: a device (single-node) or a topology (multi-node)."""

    device: Device | None = None
    topology: Topology | None = None

    @property
    def row(self) -> Device | Topology:
        row = self.device if self.device is not None else self.topology
        assert row is not None  # the request serializer holds a report to exactly one
        return row

    @property
    def site_id(self) -> UUID:
        return self.row.site_id

    def describe(self) -> str:
        if self.device is not None:
            return f"device {self.device.hostname}"
        assert self.topology is not None
        return f"topology {self.topology.label}"


def _target(report: ExecutionReport) -> ReportTarget:
    if report.device_id is not None:
        device = Device.objects.select_related("site").filter(id=report.device_id).first()
        if device is None:
            raise ValidationError({"device_id": [f"No device {report.device_id}."]})
        return ReportTarget(device=device)
    assert report.topology_id is not None  # the request serializer holds a report to exactly one
    topology = Topology.objects.select_related("site").filter(id=report.topology_id).first()
    if topology is None:
        raise ValidationError({"topology_id": [f"No topology {report.topology_id}."]})
    return ReportTarget(topology=topology)


def _requirement(report: ExecutionReport, target: ReportTarget) -> Requirement:
    """The requirement the execution judges, from its name or its test, within the policies of
    the target's resource class(es)."""
    candidates = Requirement.objects.select_related("policy").filter(retired_at__isnull=True)
    if target.device is not None:
        candidates = candidates.filter(
            policy__resource_class=target.device.resource_class, scope=RequirementScope.SINGLE_NODE
        )
    elif target.topology is not None:
        resource_classes = Device.objects.filter(memberships__topology=target.topology).values("resource_class")
        candidates = candidates.filter(
            policy__resource_class__in=resource_classes, scope=RequirementScope.MULTI_NODE, unit=target.topology.unit
        )
    field = "requirement" if report.requirement else "test"
    if report.requirement:
        candidates = candidates.filter(name=report.requirement)
    if report.test:
        candidates = candidates.filter(test=report.test)
    found = list(candidates[:2])
    if not found:
        what = f"requirement {report.requirement!r}" if report.requirement else f"test {report.test!r}"
        raise ValidationError({field: [f"No active {what} in the acceptance policy of {target.describe()}."]})
    if len(found) > 1:
        raise ValidationError({field: ["More than one requirement matches; name the requirement."]})
    return found[0]


#: The key of a job's parameters that makes it a culprit-isolation round (`diagnosis.isolation`).
ISOLATION_PARAMETER = "isolation"


def is_diagnostic_job(job: Job | None) -> bool:
    """A job run for a diagnosis: its executions are evidence for the diagnosis only."""
    return job is not None and isinstance(job.parameters, dict) and ISOLATION_PARAMETER in job.parameters


def _job(report: ExecutionReport, site_id: UUID) -> Job | None:
    if report.job_id is None:
        return None
    job = Job.objects.filter(id=report.job_id).only("id", "site_id", "parameters").first()
    if job is None or job.site_id != site_id:
        raise ValidationError({"job_id": [f"No job {report.job_id} at this execution's site."]})
    return job


@transaction.atomic
def execution_report(*, execution_id: UUID, report: ExecutionReport, actor: Actor, reported_by: str) -> ReportOutcome:
    """Create the execution, or apply the report's changes to it (a replay changes nothing), and
    record the device's fingerprint when the report carries one (`burnin.fingerprints`)."""
    target = _target(report)
    # The execution, its evaluation, the fingerprint and health evidence it carries (hence a
    # certificate or a lifecycle move): a satellite writes them only for what it serves.
    ensure_reaches(
        actor,
        device_ids=[target.device.id] if target.device is not None else [],
        topology_ids=[target.topology.id] if target.topology is not None else [],
    )
    if report.job_id is not None and reach(actor).confined:
        # ... and files them only under its own jobs (a job's end closes its executions).
        ensure_reaches(
            actor, satellite_id=Job.objects.filter(id=report.job_id).values_list("satellite_id", flat=True).first()
        )
    if report.health is not None and target.device is None:
        raise ValidationError({"health": ["Health evidence belongs to a single device's execution, not a topology's."]})
    if report.inventory is not None and target.device is None:
        raise ValidationError({"inventory": ["Only a single-device execution (device_id) carries an inventory."]})
    members = None
    if report.member_health is not None:
        if target.topology is None:
            raise ValidationError(
                {"member_health": ["Only a multi-node execution (topology_id) carries member_health."]}
            )
        report, members = _members_judged(report, target.topology)
    observation = (
        Observation.of(target.device.id, report.inventory, execution_id)
        if report.inventory is not None and target.device is not None
        else None
    )
    outcome = _report(execution_id, report, target, reported_by, observation)
    if observation is not None:
        fingerprint_observe(observation, now=timezone.now())
    if members is not None and (outcome.created or "status" in outcome.changed):  # a replay judges nothing again
        collective_xids_judge(outcome.execution, *members)
    return outcome


Members = tuple[list[Device], dict[UUID, list[XidEvent]], JobBurst]


def _members_judged(report: ExecutionReport, topology: Topology) -> tuple[ExecutionReport, Members | None]:
    """A finished multi-node execution's member windows judged together (docs/remediation.md): a burst errors the
    execution with the workload's crash; the members that logged something of their own, with the windows and the
    burst, for the ladder. Nothing for a running one. One statement."""
    assert report.member_health is not None
    devices = {d.id: d for d in Device.objects.filter(memberships__topology=topology)}
    strangers = [str(device_id) for device_id, _ in report.member_health if device_id not in devices]
    if strangers:
        raise ValidationError(
            {"member_health": [f"Not a member of topology {topology.label}: {', '.join(strangers[:5])}."]}
        )
    if report.status not in FINISHED_EXECUTION_STATUSES:
        return report, None
    windows = {device_id: xid_events(health) for device_id, health in report.member_health}
    burst, crashed = collective_burst(windows, len(devices))
    if crashed:
        report = replace(report, status=ExecutionStatus.ERRORED, error=crashed)
    return report, ([devices[i] for i, window in windows.items() if window], windows, burst)


def _report(
    execution_id: UUID,
    report: ExecutionReport,
    target: ReportTarget,
    reported_by: str,
    observation: Observation | None,
) -> ReportOutcome:
    site_id = target.site_id
    fingerprint_sha256 = observation.sha256 if observation is not None else None

    existing = TestExecution.objects.select_for_update().filter(id=execution_id).first()
    if existing is None:
        requirement = _requirement(report, target)
        job = _job(report, site_id)
        now = timezone.now()
        execution = TestExecution(
            id=execution_id,
            site_id=site_id,
            job=job,
            requirement=requirement,
            test=report.test or requirement.test,
            device=target.device,
            topology=target.topology,
            status=report.status,
            parameters=report.parameters,
            metrics=report.metrics,
            error=report.error,
            started_at=report.started_at,
            finished_at=report.finished_at,
            reported_by=reported_by,
            diagnostic=is_diagnostic_job(job),
            health=report.health,
            fatal_xids=fatal_xid_count(report.health),
            fingerprint_sha256=fingerprint_sha256,
            created_at=now,
            updated_at=now,
        )
        try:
            with transaction.atomic():
                execution.save(force_insert=True)
        except IntegrityError:
            # Another report of the same id won the race; apply ours as an update.
            existing = TestExecution.objects.select_for_update().get(id=execution_id)
        else:
            if report.health is not None:
                fatal_xids_judge(execution)
            return ReportOutcome(execution, created=True)
    outcome = _update(existing, report, target, fingerprint_sha256)
    if "health" in outcome.changed:
        fatal_xids_judge(outcome.execution)
    return outcome


def _update(
    execution: TestExecution, report: ExecutionReport, target: ReportTarget, fingerprint_sha256: str | None
) -> ReportOutcome:
    if (execution.device_id, execution.topology_id) != (
        target.device.id if target.device else None,
        target.topology.id if target.topology else None,
    ):
        field = "device_id" if target.device else "topology_id"
        raise ValidationError({field: ["An execution's target cannot change; report a new execution id."]})
    if report.requirement and report.requirement != execution.requirement.name:
        raise ValidationError({"requirement": ["An execution's requirement cannot change."]})
    if report.test and report.test != execution.test:
        raise ValidationError({"test": ["An execution's test cannot change."]})
    if execution.status in FINISHED_EXECUTION_STATUSES and report.status == ExecutionStatus.RUNNING:
        raise ValidationError(
            {"status": [f"The execution already finished ({execution.status}); it cannot run again."]}
        )
    if report.job_id is not None and report.job_id != execution.job_id:
        _job(report, execution.site_id)
    wanted = {
        "status": report.status,
        "parameters": report.parameters,
        "metrics": report.metrics,
        "error": report.error,
        "started_at": report.started_at,
        "finished_at": report.finished_at,
        "job_id": report.job_id,
        # evidence once stored is replaced by newer evidence, never erased by a report without any
        "health": execution.health if report.health is None else report.health,
    }
    changed = [name for name in MUTABLE_FIELDS if getattr(execution, name) != wanted[name]]
    # The fingerprint is not evidence the evaluation reads: it changes no `updated_at`.
    refingerprinted = fingerprint_sha256 is not None and fingerprint_sha256 != execution.fingerprint_sha256
    if refingerprinted:
        execution.fingerprint_sha256 = fingerprint_sha256
    if not changed:
        if refingerprinted:
            execution.save(update_fields=["fingerprint_sha256"])
        return ReportOutcome(execution, created=False)
    for name in changed:
        setattr(execution, name, wanted[name])
    fields = [*changed, "updated_at", *(["fingerprint_sha256"] if refingerprinted else [])]
    if "health" in changed:
        execution.fatal_xids = fatal_xid_count(execution.health)
        fields.append("fatal_xids")
    execution.updated_at = next_updated_at(execution.updated_at, timezone.now())
    execution.save(update_fields=fields)
    return ReportOutcome(execution, created=False, changed=tuple(changed))


def executions_abandon(job_ids: Sequence[UUID], error: str) -> int:
    """Executions of these jobs still `running` end `errored` (their runner is gone). Each gets a
    new `updated_at`, so it is evaluated again (as errored) and the projection moves on.

    Subscribed to job ends (`fleet.jobs.services.on_jobs_ended`, in this app's `ready`): whatever
    ends a job — finish, cancel, an expired lease — closes what it left running, in the same
    transaction."""
    now = timezone.now()
    return TestExecution.objects.filter(job_id__in=list(job_ids), status=ExecutionStatus.RUNNING).update(
        status=ExecutionStatus.ERRORED,
        error=error,
        finished_at=now,
        updated_at=Greatest(Value(now), F("updated_at") + timedelta(microseconds=1)),
    )
