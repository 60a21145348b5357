"""What a burn-in window's kernel-logged GPU events do to the device: nothing, a step of the remediation ladder,
or `needs_repair` (docs/remediation.md).

Called by `execution_report` in the report's transaction when the stored health evidence changes (a report that
fails validation writes nothing and moves nothing). Load, decide, write: the window's events, the device's other
windows of the last 24 h and the ladder steps it took (`RemedyStep`) are read; the correlation rule
(`fleet_rules.xid_correlation`) says what the events ask for and the ladder (`fleet_rules.remediation_ladder`)
what the device does next:

* a GPU reset or a reboot: a `RemedyStep` is recorded, and when the job that saw the events ends (`on_jobs_ended`)
  a `remediation` job is created through the job path (`fleet.burnin.remedies`): the agent takes the step, then
  runs the job's burn-in again; that burn-in's report judges the step (cured or persisted) and asks the ladder
  again;
* `repair` (the catalogue says a person must act, or the ladder is exhausted): the lifecycle service moves the
  device behind the circuit breaker of its site × resource class (`guarded_repair_moves_apply`), cause
  `fatal_xid`, the reason naming the events and the ladder taken. A device in service is never pulled.

A collective's members are judged together in the same statements as one device
(`tests/burnin/test_remedy_statements.py` holds them equal at 3 and 12 members logging Xids).
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from uuid import UUID

from django.utils import timezone

from fleet.burnin import metrics
from fleet.burnin.models import RemedyStep, TestExecution
from fleet.burnin.remedies import ladder_policy, ladder_repair_move, steps_ask, taken_by_device
from fleet.inventory.models import Device
from fleet.jobs.models import Job
from fleet.lifecycle.breakers import Guarded, guarded_repair_moves_apply
from fleet.lifecycle.services import AutomaticMove
from fleet_rules.health_evidence import XidEvent, fatal_events, is_pci_bus_id, xid_events
from fleet_rules.remediation_ladder import LadderDecision, device_ladder_next
from fleet_rules.vocabulary import RemedyOutcome, XidResolution
from fleet_rules.xid_correlation import JobBurst, XidJudgement, job_burst, xid_judge

logger = logging.getLogger("fleet.burnin")
R = XidResolution
NOTHING = Guarded([], [], [])


def fatal_xid_count(health: Mapping[str, Any] | None) -> int:
    return len(fatal_events(health))


def _event_refs(event: XidEvent) -> dict[str, Any]:
    return {
        "kind": event.kind.value,
        "code": event.code,
        "pci_bus_id": event.pci_bus_id,
        "at": event.at.isoformat().replace("+00:00", "Z") if event.at else None,
    }


def repair_move(
    execution: TestExecution, judgement: XidJudgement, decision: LadderDecision, device_id: UUID | None = None
) -> AutomaticMove | None:
    """The move to repair the decision calls for (pure given the rows); `device_id` the device's whose window it
    was (default: the execution's)."""
    device_id = device_id or execution.device_id
    if decision.action is not R.REPAIR or device_id is None:
        return None
    deciding = judgement.deciding
    refs = {
        "execution": str(execution.id),
        "requirement": execution.requirement.name,
        **({"xid": _event_refs(deciding.event)} if deciding else {}),
        "fatal_events": sum(1 for e in judgement.events if e.event.fatal),
    }
    return ladder_repair_move(device_id, judgement.reason, decision, refs)


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
    return _ladders_take(execution, [_Window(execution.device, window, judged)])


def collective_xids_judge(
    execution: TestExecution, devices: Sequence[Device], windows: Mapping[UUID, Sequence[XidEvent]], burst: JobBurst
) -> None:
    """Each member's window of a multi-node execution that logged something of its own (not the workload's burst,
    `collective_burst`) takes the ladder as a single-node window does, all in the same statements; a member whose
    events are all the workload's is not read."""
    taking: list[_Window] = []
    for device in devices:
        window = windows.get(device.id) or []
        if any(not e.workload for e in xid_judge(window=window, job=burst).events):
            taking.append(_Window(device, window, None, burst))
    _ladders_take(execution, taking)


@dataclass(frozen=True, slots=True)
class _Window:
    """One device's window to judge: its events, the step it judges (a remediation job's burn-in), and the
    job's burst (a collective's member)."""

    device: Device
    events: Sequence[XidEvent]
    judged: RemedyStep | None
    burst: JobBurst | None = None


def _ladders_take(execution: TestExecution, windows: Sequence[_Window]) -> Guarded:
    """Judge the devices' windows of one execution (each with its history and, for a collective, the job's burst),
    then take each one's ladder. Load, decide, write: every device's earlier windows and steps are read in two
    statements, the steps asked and their jobs written together and the moves to repair applied together."""
    if not windows:
        return NOTHING
    now = timezone.now()
    policy = ladder_policy()
    since = now - policy.window
    ids = [w.device.id for w in windows]
    histories: dict[UUID, list[list[XidEvent]]] = defaultdict(list)
    earlier = TestExecution.objects.filter(device_id__in=ids, health__isnull=False, created_at__gte=since)
    for device_id, health in earlier.exclude(id=execution.id).values_list("device_id", "health"):
        histories[device_id].append(xid_events(health))
    # the history is windowed by when the service stored it, not by the machine's clock (its events' `at`)
    judgements = [xid_judge(window=w.events, history=histories[w.device.id], job=w.burst) for w in windows]
    judged = [_judged(w.judged, j, execution, now) for w, j in zip(windows, judgements, strict=True) if w.judged]
    if judged:
        RemedyStep.objects.bulk_update(judged, ["outcome", "result", "judged_by", "finished_at"])
    taken = taken_by_device(ids, since)
    asked: list[RemedyStep] = []
    moves: list[AutomaticMove] = []
    for window, judgement in zip(windows, judgements, strict=True):
        device = window.device
        decision = device_ladder_next(
            asked=judgement.step,
            taken=taken[device.id],
            now=now,
            enrolled_at=device.enrolled_at,
            state=device.state,
            policy=policy,
        )
        if decision.action in (R.RESET_GPU, R.REBOOT):
            deciding = judgement.deciding
            asked.append(
                RemedyStep(
                    device_id=device.id,
                    step=decision.action,
                    reason=judgement.reason,
                    # only a PCI bus id names a GPU to a step's command (the event's text is the machine's)
                    gpus=[deciding.event.pci_bus_id] if deciding and is_pci_bus_id(deciding.event.pci_bus_id) else [],
                    asked_by=execution,
                    created_at=now,
                )
            )
            metrics.remedy_step_counted(decision.action, RemedyOutcome.UNDER_WAY)
        elif (move := repair_move(execution, judgement, decision, device.id)) is not None:
            moves.append(move)
    if asked:
        RemedyStep.objects.bulk_create(asked)
        # the job that saw the events still holds the devices: the steps' jobs come when it ends (remedies_dispatch)
        if execution.job_id is None or not Job.objects.filter(id=execution.job_id, finished_at__isnull=True).exists():
            steps_ask(asked)
    return guarded_repair_moves_apply(moves)


def _judged(step: RemedyStep, judgement: XidJudgement, execution: TestExecution, now: datetime) -> RemedyStep:
    """The step a remediation job's burn-in judges: cured, or persisted when the window still asks for one."""
    persisted = judgement.step in (R.RESET_GPU, R.REBOOT, R.REPAIR)
    step.outcome = RemedyOutcome.PERSISTED if persisted else RemedyOutcome.CURED
    step.result = judgement.reason if persisted else "the burn-in after it logged nothing that asks for a step"
    step.judged_by = execution
    step.finished_at = now
    metrics.remedy_step_counted(step.step, step.outcome)
    return step


def collective_burst(members: Mapping[UUID, Sequence[XidEvent]], devices: int) -> tuple[JobBurst, str]:
    """What the member windows of one multi-node execution logged together, and the workload's crash when a code
    is a burst ("the workload crashed on N devices (Xid 13)"; empty when none)."""
    burst = job_burst(members.values(), devices)
    said = [xid_judge(window=window, job=burst).workload_reason for window in members.values()]
    return burst, max(said, key=len, default="")
