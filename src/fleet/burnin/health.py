"""What a burn-in window's kernel-logged GPU events do to the device: nothing, a step of the remediation ladder,
or `needs_repair` (docs/remediation.md).

Called by `execution_report` in the report's transaction when the stored health evidence changes (a report that
fails validation writes nothing and moves nothing). Load, decide, write: the window's events, the device's other
windows of the last 24 h and the ladder steps it took (`RemedyStep`) are read; the correlation rule
(`fleet_rules.xid_correlation`) says what the events ask for and the ladder (`fleet_rules.remediation_ladder`)
what the device does next:

* a GPU reset or a reboot: a `RemedyStep` is recorded, and when the job that saw the events ends (`on_jobs_ended`)
  a `remediation` job is created through the job path: the agent takes the step, then runs the job's burn-in
  again; that burn-in's report judges the step (cured or persisted) and asks the ladder again;
* `repair` (the catalogue says a person must act, or the ladder is exhausted): the lifecycle service moves the
  device behind the circuit breaker of its site × resource class (`guarded_repair_moves_apply`), cause
  `fatal_xid`, the reason naming the events and the ladder taken. A device in service is never pulled.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from datetime import timedelta
from typing import Any
from uuid import UUID

from django.conf import settings
from django.db.models import Q
from django.utils import timezone

from fleet.burnin import metrics
from fleet.burnin.models import RemedyStep, TestExecution
from fleet.inventory.models import Device
from fleet.jobs.models import Job
from fleet.jobs.services import JobRefused, JobSpec, jobs_create
from fleet.lifecycle.breakers import Guarded, guarded_repair_moves_apply
from fleet.lifecycle.services import AutomaticMove
from fleet_rules.eligibility import is_burn_in_eligible
from fleet_rules.health_evidence import XidEvent, fatal_events, is_pci_bus_id, xid_events
from fleet_rules.remediation_ladder import STEP_NAMES, LadderDecision, LadderPolicy, TakenStep, ladder_next
from fleet_rules.vocabulary import (
    DeviceState,
    JobReason,
    Mover,
    RemedyOutcome,
    TransitionCause,
    WorkflowName,
    XidResolution,
)
from fleet_rules.xid_correlation import JobBurst, XidJudgement, job_burst, xid_judge

logger = logging.getLogger("fleet.burnin")
R = XidResolution
NOTHING = Guarded([], [], [])


def fatal_xid_count(health: Mapping[str, Any] | None) -> int:
    return len(fatal_events(health))


def ladder_policy() -> LadderPolicy:
    """The ladder's allowance from the settings (`FLEET_REMEDY_RESETS`, `_REBOOTS`, `_WINDOW_HOURS`)."""
    fleet = settings.FLEET
    return LadderPolicy(
        {R.RESET_GPU: int(fleet["REMEDY_RESETS"]), R.REBOOT: int(fleet["REMEDY_REBOOTS"])},
        timedelta(hours=int(fleet["REMEDY_WINDOW_HOURS"])),
    )


def _event_refs(event: XidEvent) -> dict[str, Any]:
    return {
        "kind": event.kind.value,
        "code": event.code,
        "pci_bus_id": event.pci_bus_id,
        "at": event.at.isoformat().replace("+00:00", "Z") if event.at else None,
    }


def _taken(rows: Sequence[RemedyStep]) -> list[TakenStep]:
    return [TakenStep(R(r.step), r.created_at, RemedyOutcome(r.outcome)) for r in rows]


def repair_move(
    execution: TestExecution, judgement: XidJudgement, decision: LadderDecision, device_id: UUID | None = None
) -> AutomaticMove | None:
    """The move to repair the decision calls for (pure given the rows); `device_id` the device's whose window it
    was (default: the execution's)."""
    device_id = device_id or execution.device_id
    if decision.action is not R.REPAIR or device_id is None:
        return None
    deciding = judgement.deciding
    reason = f"{judgement.reason} during its burn-in" + (f"; {decision.reason}" if decision.reason else "")
    return AutomaticMove(
        device_id,
        DeviceState.NEEDS_REPAIR,
        TransitionCause.FATAL_XID,
        reason,
        {
            "execution": str(execution.id),
            "requirement": execution.requirement.name,
            **({"xid": _event_refs(deciding.event)} if deciding else {}),
            "fatal_events": sum(1 for e in judgement.events if e.event.fatal),
            "ladder": [step.as_json() for step in decision.ladder],
            "ladder_exhausted": decision.exhausted,
        },
    )


def fatal_xids_judge(execution: TestExecution) -> Guarded:
    """Judge the execution's health evidence: nothing, a ladder step, or the move to repair."""
    if execution.device_id is None or execution.health is None:
        return NOTHING
    window = xid_events(execution.health)
    # the step this burn-in follows, when it is a remediation job's (one statement, only for a job's report)
    judged = (
        RemedyStep.objects.filter(job_id=execution.job_id, outcome=RemedyOutcome.UNDER_WAY).first()
        if execution.job_id is not None
        else None
    )
    if not window and judged is None:
        return NOTHING
    assert execution.device is not None
    return _device_ladder(execution, execution.device, window, judged)


def collective_xids_judge(
    execution: TestExecution, devices: Sequence[Device], windows: Mapping[UUID, Sequence[XidEvent]], burst: JobBurst
) -> None:
    """Each member's window of a multi-node execution that logged something of its own (not the workload's burst,
    `collective_burst`) takes the ladder as a single-node window does; a member whose events are all the
    workload's costs no statement."""
    for device in devices:
        window = windows.get(device.id) or []
        if any(not e.workload for e in xid_judge(window=window, job=burst).events):
            _device_ladder(execution, device, window, None, burst)


def _device_ladder(
    execution: TestExecution,
    device: Device,
    window: Sequence[XidEvent],
    judged: RemedyStep | None,
    burst: JobBurst | None = None,
) -> Guarded:
    """Judge one device's window (with its history and, for a collective, the job's burst), then take the ladder."""
    now = timezone.now()
    policy = ladder_policy()
    since = now - policy.window
    history = [
        xid_events(health)
        for health in TestExecution.objects.filter(device_id=device.id, health__isnull=False, created_at__gte=since)
        .exclude(id=execution.id)
        .values_list("health", flat=True)
    ]
    # the history is windowed by when the service stored it, not by the machine's clock (its events' `at`)
    judgement = xid_judge(window=window, history=history, job=burst)
    if judged is not None:
        persisted = judgement.step in (R.RESET_GPU, R.REBOOT, R.REPAIR)
        judged.outcome = RemedyOutcome.PERSISTED if persisted else RemedyOutcome.CURED
        judged.result = judgement.reason if persisted else "the burn-in after it logged nothing that asks for a step"
        judged.judged_by = execution
        judged.finished_at = now
        judged.save(update_fields=["outcome", "result", "judged_by", "finished_at"])
        metrics.remedy_step_counted(judged.step, judged.outcome)
    taken = _taken(list(RemedyStep.objects.filter(device_id=device.id, created_at__gte=since)))
    decision = ladder_next(asked=judgement.step, taken=taken, now=now, policy=policy)
    if decision.action in (R.RESET_GPU, R.REBOOT) and not is_burn_in_eligible(
        enrolled_at=device.enrolled_at, state=device.state
    ):
        # an accepted device: no job can take a step on it; the lifecycle's table says whether it may move
        said = f"{STEP_NAMES[decision.action]} asked, but no burn-in job can hold a device {device.state}"
        decision = LadderDecision(R.REPAIR, said, decision.ladder)
    if decision.action in (R.RESET_GPU, R.REBOOT):
        deciding = judgement.deciding
        step = RemedyStep.objects.create(
            device_id=device.id,
            step=decision.action,
            reason=judgement.reason,
            # only a PCI bus id names a GPU to a step's command (the event's text is the machine's)
            gpus=[deciding.event.pci_bus_id] if deciding and is_pci_bus_id(deciding.event.pci_bus_id) else [],
            asked_by=execution,
            created_at=now,
        )
        metrics.remedy_step_counted(decision.action, RemedyOutcome.UNDER_WAY)
        # the job that saw the events still holds the device: the step's job comes when it ends (remedies_dispatch)
        if execution.job_id is None or not Job.objects.filter(id=execution.job_id, finished_at__isnull=True).exists():
            _step_ask(step)
        return NOTHING
    move = repair_move(execution, judgement, decision, device.id)
    return guarded_repair_moves_apply([move] if move is not None else [])


def collective_burst(members: Mapping[UUID, Sequence[XidEvent]], devices: int) -> tuple[JobBurst, str]:
    """What the member windows of one multi-node execution logged together, and the workload's crash when a code
    is a burst ("the workload crashed on N devices (Xid 13)"; empty when none)."""
    burst = job_burst(members.values(), devices)
    said = [xid_judge(window=window, job=burst).workload_reason for window in members.values()]
    return burst, max(said, key=len, default="")


def remedies_dispatch(job_ids: Sequence[UUID], why: str) -> None:
    """Subscribed to job ends: the steps the ended jobs' reports asked for get their `remediation` job, and a
    remediation job that ended with its step still under way (the step failed, or no burn-in reported after it)
    fails it and asks the ladder again. One statement when nothing waits."""
    if not job_ids:
        return
    waiting = RemedyStep.objects.filter(
        Q(asked_by__job_id__in=job_ids, job__isnull=True) | Q(job_id__in=job_ids), outcome=RemedyOutcome.UNDER_WAY
    ).select_related("asked_by__job", "job")
    for step in waiting:
        if step.job_id is not None:
            _step_failed(step, why)
        else:
            _step_ask(step)


def _step_ask(step: RemedyStep) -> None:
    """Give the step its `remediation` job: the burn-in of the job that saw the events (or, for a report without
    a job, the requirement that saw them) again, with the step first (`parameters.remedy`)."""
    seen = step.asked_by
    if seen is None:
        _step_end(step, RemedyOutcome.FAILED, "the execution that asked for it is gone")
        return
    device = step.device
    job = seen.job
    parameters: dict[str, Any]
    if seen.topology_id is not None:
        # a collective's member: the collective cannot run on one node; the device's single-node burn-in runs
        # again, each requirement with the parameters it last ran with
        last = (
            TestExecution.objects.filter(device_id=device.id, diagnostic=False, requirement__retired_at__isnull=True)
            .order_by("requirement_id", "-created_at")
            .distinct("requirement_id")
            .select_related("requirement")
        )
        requirements = [{"name": e.requirement.name, "test": e.test, "parameters": e.parameters} for e in last]
        if not requirements:
            _step_end(step, RemedyOutcome.FAILED, "the device has no single-node burn-in to run again")
            return
        parameters = {"resource_class": device.resource_class, "requirements": requirements}
        satellite_id = device.satellite_id
    elif job is not None:
        parameters = {k: v for k, v in job.parameters.items() if k != "remedy"}
        satellite_id = job.satellite_id
    else:
        requirement = {"name": seen.requirement.name, "test": seen.test, "parameters": seen.parameters}
        parameters = {"resource_class": device.resource_class, "requirements": [requirement]}
        satellite_id = device.satellite_id
    parameters["remedy"] = {"id": str(step.id), "step": step.step, "gpus": step.gpus, "reason": step.reason}
    spec = JobSpec(device.site_id, satellite_id, WorkflowName.SINGLE_NODE, (step.device_id,), parameters)
    try:
        (created,) = jobs_create(specs=[spec], requested_by=Mover.SYSTEM.value, reason=JobReason.REMEDIATION)
    except JobRefused as exc:
        _step_end(step, RemedyOutcome.FAILED, str(exc))
        return
    step.job = created
    step.save(update_fields=["job"])


def _step_end(step: RemedyStep, outcome: RemedyOutcome, result: str) -> None:
    step.outcome, step.result, step.finished_at = outcome, result, timezone.now()
    step.save(update_fields=["outcome", "result", "finished_at"])
    metrics.remedy_step_counted(step.step, step.outcome)


def _step_failed(step: RemedyStep, why: str) -> None:
    """The remediation job ended and no burn-in judged its step: it failed; the ladder goes on from it."""
    now = timezone.now()
    _step_end(step, RemedyOutcome.FAILED, (step.job.failure_reason if step.job is not None else "") or why)
    if step.asked_by is None:
        return
    policy = ladder_policy()
    taken = _taken(list(RemedyStep.objects.filter(device_id=step.device_id, created_at__gte=now - policy.window)))
    decision = ladder_next(asked=R(step.step), taken=taken, now=now, policy=policy)
    if decision.action in (R.RESET_GPU, R.REBOOT):
        following = RemedyStep.objects.create(
            device_id=step.device_id,
            step=decision.action,
            reason=step.reason,
            gpus=step.gpus,
            asked_by=step.asked_by,
            created_at=now,
        )
        _step_ask(following)
    elif decision.action is R.REPAIR:
        move = AutomaticMove(
            step.device_id,
            DeviceState.NEEDS_REPAIR,
            TransitionCause.FATAL_XID,
            f"{step.reason} during its burn-in" + (f"; {decision.reason}" if decision.reason else ""),
            {
                "execution": str(step.asked_by_id),
                "ladder": [t.as_json() for t in decision.ladder],
                "ladder_exhausted": decision.exhausted,
            },
        )
        guarded_repair_moves_apply([move])
