"""The remediation ladder's steps on their way (docs/remediation.md): each step asked gets its `remediation` job
through the job path, and a remediation job that ended without a burn-in judging its step fails it and asks the
ladder again.

Load, decide, write, in a constant number of statements whatever the number of steps: the steps with what asked
them, the single-node burn-ins of a collective's members and the devices' ladders are read at once; the jobs are
created together (`jobs_create_each`: a step whose job is refused fails alone), the steps written together and the
moves to repair applied together (`guarded_repair_moves_apply`). `fleet.burnin.health` asks the steps a window
needs; `remedies_dispatch` is subscribed to job ends.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any
from uuid import UUID

from django.conf import settings
from django.db.models import Q
from django.utils import timezone

from fleet.burnin import metrics
from fleet.burnin.models import RemedyStep, TestExecution
from fleet.jobs.services import JobRefused, JobSpec, jobs_create_each
from fleet.lifecycle.breakers import guarded_repair_moves_apply
from fleet.lifecycle.services import AutomaticMove
from fleet_rules.remediation_ladder import LadderDecision, LadderPolicy, TakenStep, ladder_next
from fleet_rules.vocabulary import DeviceState, JobReason, Mover, RemedyOutcome, TransitionCause, WorkflowName
from fleet_rules.vocabulary import XidResolution as R

_STEP_FIELDS = ["job", "outcome", "result", "finished_at"]


def ladder_policy() -> LadderPolicy:
    """The ladder's allowance from the settings (`FLEET_REMEDY_RESETS`, `_REBOOTS`, `_WINDOW_HOURS`)."""
    fleet = settings.FLEET
    return LadderPolicy(
        {R.RESET_GPU: int(fleet["REMEDY_RESETS"]), R.REBOOT: int(fleet["REMEDY_REBOOTS"])},
        timedelta(hours=int(fleet["REMEDY_WINDOW_HOURS"])),
    )


def ladder_repair_move(device_id: UUID, said: str, decision: LadderDecision, refs: dict[str, Any]) -> AutomaticMove:
    """The move to repair a ladder decision calls for: what the events said and why the ladder ended, with the
    ladder taken in its references (the device page and the evidence pack show them)."""
    reason = f"{said} during its burn-in" + (f"; {decision.reason}" if decision.reason else "")
    ladder = {"ladder": [step.as_json() for step in decision.ladder], "ladder_exhausted": decision.exhausted}
    return AutomaticMove(device_id, DeviceState.NEEDS_REPAIR, TransitionCause.FATAL_XID, reason, refs | ladder)


def taken_by_device(device_ids: Sequence[UUID], since: datetime) -> dict[UUID, list[TakenStep]]:
    """The steps each device took (was asked to take) since `since`, oldest first (one statement)."""
    taken: dict[UUID, list[TakenStep]] = defaultdict(list)
    for row in RemedyStep.objects.filter(device_id__in=device_ids, created_at__gte=since):
        taken[row.device_id].append(TakenStep(R(row.step), row.created_at, RemedyOutcome(row.outcome)))
    return taken


def remedies_dispatch(job_ids: Sequence[UUID], why: str) -> None:
    """Subscribed to job ends: the steps the ended jobs' reports asked for get their `remediation` job, and a
    remediation job that ended with its step still under way (the step failed, or no burn-in reported after it)
    fails it and asks the ladder again. One statement when nothing waits."""
    if not job_ids:
        return
    waiting = RemedyStep.objects.filter(
        Q(asked_by__job_id__in=job_ids, job__isnull=True) | Q(job_id__in=job_ids), outcome=RemedyOutcome.UNDER_WAY
    ).select_related("job")
    asked: list[RemedyStep] = []
    failed: list[RemedyStep] = []
    for step in waiting:
        (failed if step.job_id is not None else asked).append(step)
    following, moves = _steps_failed(failed, why)
    steps_ask(asked + following)
    guarded_repair_moves_apply(moves)


def _ended(step: RemedyStep, outcome: RemedyOutcome, result: str, now: datetime) -> RemedyStep:
    step.outcome, step.result, step.finished_at = outcome, result, now
    metrics.remedy_step_counted(step.step, step.outcome)
    return step


def _steps_failed(steps: Sequence[RemedyStep], why: str) -> tuple[list[RemedyStep], list[AutomaticMove]]:
    """The remediation jobs ended and no burn-in judged their steps: they failed; each device's ladder goes on
    from its step. Returns the following steps (created, for `steps_ask`) and the moves to repair."""
    if not steps:
        return [], []
    now = timezone.now()
    for step in steps:
        _ended(step, RemedyOutcome.FAILED, (step.job.failure_reason if step.job is not None else "") or why, now)
    RemedyStep.objects.bulk_update(steps, _STEP_FIELDS)
    going_on = [s for s in steps if s.asked_by_id is not None]
    if not going_on:
        return [], []
    policy = ladder_policy()
    taken = taken_by_device([s.device_id for s in going_on], now - policy.window)
    following: list[RemedyStep] = []
    moves: list[AutomaticMove] = []
    for step in going_on:
        decision = ladder_next(asked=R(step.step), taken=taken[step.device_id], now=now, policy=policy)
        if decision.action in (R.RESET_GPU, R.REBOOT):
            following.append(
                RemedyStep(
                    device_id=step.device_id,
                    step=decision.action,
                    reason=step.reason,
                    gpus=step.gpus,
                    asked_by_id=step.asked_by_id,
                    created_at=now,
                )
            )
        elif decision.action is R.REPAIR:
            refs = {"execution": str(step.asked_by_id)}
            moves.append(ladder_repair_move(step.device_id, step.reason, decision, refs))
    RemedyStep.objects.bulk_create(following)
    for asked in following:  # asked, as a step a window asks for is
        metrics.remedy_step_counted(asked.step, RemedyOutcome.UNDER_WAY)
    return following, moves


def steps_ask(steps: Sequence[RemedyStep]) -> None:
    """Give each step its `remediation` job: the burn-in of the job that saw the events (or, for a report without
    a job, the requirement that saw them) again, with the step first (`parameters.remedy`). A step whose job
    cannot be had fails, with why."""
    if not steps:
        return
    now = timezone.now()
    loaded = list(
        RemedyStep.objects.filter(id__in=[s.id for s in steps]).select_related(
            "device", "asked_by__job", "asked_by__requirement"
        )
    )
    members = {s.device_id for s in loaded if s.asked_by is not None and s.asked_by.topology_id is not None}
    burn_ins = _single_node_burn_ins(members)
    wanting: list[tuple[RemedyStep, JobSpec]] = []
    for step in loaded:
        spec = _spec(step, burn_ins)
        if isinstance(spec, str):
            _ended(step, RemedyOutcome.FAILED, spec, now)
        else:
            wanting.append((step, spec))
    created = jobs_create_each(
        specs=[spec for _, spec in wanting], requested_by=Mover.SYSTEM.value, reason=JobReason.REMEDIATION
    )
    for (step, _), job in zip(wanting, created, strict=True):
        if isinstance(job, JobRefused):
            _ended(step, RemedyOutcome.FAILED, str(job), now)
        else:
            step.job = job
    RemedyStep.objects.bulk_update(loaded, _STEP_FIELDS)


def _single_node_burn_ins(device_ids: set[UUID]) -> dict[UUID, list[dict[str, Any]]]:
    """Each device's single-node burn-in, each requirement with the parameters it last ran with (one statement,
    none without devices): what a collective member's step runs again (the collective cannot run on one node)."""
    if not device_ids:
        return {}
    last = (
        TestExecution.objects.filter(device_id__in=device_ids, diagnostic=False, requirement__retired_at__isnull=True)
        .order_by("device_id", "requirement_id", "-created_at")
        .distinct("device_id", "requirement_id")
        .select_related("requirement")
    )
    burn_ins: dict[UUID, list[dict[str, Any]]] = defaultdict(list)
    for e in last:
        assert e.device_id is not None
        burn_ins[e.device_id].append({"name": e.requirement.name, "test": e.test, "parameters": e.parameters})
    return burn_ins


def _spec(step: RemedyStep, burn_ins: dict[UUID, list[dict[str, Any]]]) -> JobSpec | str:
    """The step's job, or why it cannot have one."""
    seen = step.asked_by
    if seen is None:
        return "the execution that asked for it is gone"
    device = step.device
    job = seen.job
    parameters: dict[str, Any]
    if seen.topology_id is not None:
        # a collective's member: the device's single-node burn-in runs again
        if not burn_ins.get(device.id):
            return "the device has no single-node burn-in to run again"
        parameters = {"resource_class": device.resource_class, "requirements": burn_ins[device.id]}
        satellite_id = device.satellite_id
    elif job is not None:
        parameters = {k: v for k, v in job.parameters.items() if k != "remedy"}
        satellite_id = job.satellite_id
    else:
        requirement = {"name": seen.requirement.name, "test": seen.test, "parameters": seen.parameters}
        parameters = {"resource_class": device.resource_class, "requirements": [requirement]}
        satellite_id = device.satellite_id
    parameters["remedy"] = {"id": str(step.id), "step": step.step, "gpus": step.gpus, "reason": step.reason}
    return JobSpec(device.site_id, satellite_id, WorkflowName.SINGLE_NODE, (step.device_id,), parameters)
