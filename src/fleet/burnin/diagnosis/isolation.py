"""Culprit isolation for a failed rack cohort: preview, dispatch, advance — load, decide in
`fleet_rules.isolation`, write; the rounds' jobs go through the standard Job path
(`jobs_create`: one active job per device, under the devices' locks taken in primary-key order).

A round's jobs carry `isolation` in their parameters, so their executions are reported
`diagnostic` and never become the topology's latest execution: the rack's projection row keeps
the failed cohort run's verdict. Advancing is explicit and idempotent (`isolation_advance`, called
by `fleet isolate` and by `POST …/isolation-plans/{id}/advance/`): once every job of the current
round has ended and its execution is evaluated, the outcomes narrow the suspects and the next
round is dispatched, or the plan ends and names its culprits as diagnoses on the devices.
Every read is a fixed number of queries: the cohort, never the fleet.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any
from uuid import UUID

from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction
from django.utils import timezone

from fleet.burnin.executions import ISOLATION_PARAMETER
from fleet.burnin.models import DeviceDiagnosis, EvaluationResult, IsolationPlan, PolicyProgress, TestExecution
from fleet.core.exceptions import Conflict, NotFoundError
from fleet.core.locks import lock_in_pk_order
from fleet.events.outbox import device_draft, events_record
from fleet.inventory.models import Device, Site, Topology
from fleet.jobs.models import Job
from fleet.jobs.services import JobSpec, jobs_create, jobs_expire_leases_holding
from fleet.lifecycle.breakers import guarded_repair_moves_apply
from fleet.lifecycle.services import AutomaticMove
from fleet.policies.models import ParameterProfile, Requirement
from fleet_rules.eligibility import is_enrolled
from fleet_rules.isolation import (
    NO_EVIDENCE_TRIES,
    IsolationState,
    RoundPlan,
    Subset,
    apply_round,
    give_up,
    max_rounds,
    next_round,
    start,
)
from fleet_rules.planning import satisfies
from fleet_rules.vocabulary import (
    ACTIVE_JOB_STATUSES,
    DeviceState,
    EventType,
    ExecutionStatus,
    IsolationStatus,
    JobReason,
    RequirementScope,
    TransitionCause,
    Verdict,
    WorkflowName,
)

FAILED_VERDICTS = (Verdict.FAILED, Verdict.ERRORED)


@dataclass(frozen=True)
class Cohort:
    site: Site
    topology: Topology
    requirement: Requirement
    devices: dict[str, Device]  # id → device, the failed cohort's enrolled members of the class
    parameters: dict[str, Any]  # the job's requirement entry (test, parameters, profile)

    @property
    def member_ids(self) -> list[str]:
        return sorted(self.devices)

    @property
    def device_uuids(self) -> list[UUID]:
        return [UUID(d) for d in self.member_ids]

    def hostname(self, device_id: str) -> str:
        device = self.devices.get(device_id)
        return device.hostname if device is not None else device_id


def cohort_load(*, site: Site, topology_id: UUID, requirement_name: str) -> Cohort:
    """The failed cohort, checked: field errors (400, nothing written) for a topology not at the
    site, a requirement that is not a multi-node requirement of its unit, a cohort whose
    collective has not failed under the current policy version, one of fewer than two devices, a
    satellite without the collective workflow, or no parameter profile. Six queries."""
    topology = Topology.objects.select_related("satellite").filter(id=topology_id, site=site).first()
    if topology is None:
        raise ValidationError({"topology_id": [f"No topology {topology_id} at site {site.slug}."]})
    members = list(Device.objects.filter(memberships__topology=topology).order_by("id"))
    requirement = (
        Requirement.objects.select_related("policy")
        .filter(
            name=requirement_name,
            scope=RequirementScope.MULTI_NODE,
            unit=topology.unit,
            retired_at__isnull=True,
            policy__resource_class__in={d.resource_class for d in members},
        )
        .first()
    )
    if requirement is None:
        raise ValidationError(
            {"requirement": [f"No multi-node requirement {requirement_name!r} for the devices of {topology.label}."]}
        )
    cohort = {
        str(d.id): d
        for d in members
        if d.resource_class == requirement.policy.resource_class
        and is_enrolled(enrolled_at=d.enrolled_at, state=d.state)
    }
    row = PolicyProgress.objects.filter(requirement=requirement, target_id=topology.id).first()
    if row is None or row.verdict not in FAILED_VERDICTS or row.policy_version != requirement.policy.version:
        verdict = row.verdict if row is not None else Verdict.NOT_RUN
        raise ValidationError(
            {
                "topology_id": [
                    f"{topology.label}'s {requirement.name} has not failed under the current policy version "
                    f"(its verdict: {verdict}): there is no failed cohort to isolate."
                ]
            }
        )
    if len(cohort) < 2:
        raise ValidationError({"topology_id": [f"{topology.label} has fewer than two enrolled devices to compare."]})
    advertised = {w.get("name") for w in topology.satellite.advertised_workflows or []}
    if WorkflowName.MULTI_NODE_COLLECTIVE not in advertised:
        raise ValidationError(
            {
                "topology_id": [
                    f"Satellite {topology.satellite.name} does not advertise {WorkflowName.MULTI_NODE_COLLECTIVE}."
                ]
            }
        )
    profiles = sorted(
        ParameterProfile.objects.filter(resource_class=requirement.policy.resource_class, test=requirement.test),
        key=lambda p: (p.created_at, p.name),
        reverse=True,
    )
    profile = next((p for p in profiles if satisfies(p.parameters, requirement.parameter_constraints)), None)
    if profile is None:
        raise ValidationError({"requirement": ["No parameter profile satisfies this requirement's constraints."]})
    entry = {
        "name": requirement.name,
        "test": requirement.test,
        "parameters": dict(profile.parameters),
        "parameter_profile": {"id": str(profile.id), "name": profile.name},
    }
    return Cohort(site, topology, requirement, cohort, entry)


@dataclass(frozen=True)
class IsolationPreview:
    cohort: Cohort
    max_rounds: int
    first_round: RoundPlan


def isolation_preview(*, site: Site, topology_id: UUID, requirement_name: str) -> IsolationPreview:
    cohort = cohort_load(site=site, topology_id=topology_id, requirement_name=requirement_name)
    state = start(cohort.member_ids)
    return IsolationPreview(cohort, max_rounds(len(cohort.devices)), next_round(state))


def _job_parameters(cohort: Cohort, plan_id: UUID, round_number: int, index: int, subset: Subset) -> dict[str, Any]:
    return {
        "resource_class": cohort.requirement.policy.resource_class,
        "policy_version": cohort.requirement.policy.version,
        "requirements": [cohort.parameters],
        ISOLATION_PARAMETER: {
            "plan_id": str(plan_id),
            "round": round_number,
            "subset": index,
            "suspects": list(subset.suspects),
        },
    }


def _subset_jobs(
    plan: IsolationPlan, cohort: Cohort, round_number: int, subsets: list[tuple[int, Subset]], requested_by: str
) -> list[Any]:
    """A diagnostic collective per (index, subset) of a round (the caller holds the cohort's locks)."""
    specs = [
        JobSpec(
            site_id=cohort.site.id,
            satellite_id=cohort.topology.satellite_id,
            workflow_name=WorkflowName.MULTI_NODE_COLLECTIVE,
            device_ids=tuple(UUID(d) for d in subset.devices),
            parameters=_job_parameters(cohort, plan.id, round_number, index, subset),
            topology_id=cohort.topology.id,
        )
        for index, subset in subsets
    ]
    return jobs_create(specs=specs, requested_by=requested_by, reason=JobReason.DIAGNOSIS, locked=True)


def _dispatch_round(plan: IsolationPlan, cohort: Cohort, state: IsolationState, requested_by: str) -> None:
    """Create the next round's jobs (the caller holds the cohort's device locks)."""
    decided = next_round(state)
    round_number = state.rounds + 1
    jobs = _subset_jobs(plan, cohort, round_number, list(enumerate(decided.subsets)), requested_by)
    plan.rounds = [
        *plan.rounds,
        {
            "round": round_number,
            "subsets": [
                {
                    "group": subset.group,
                    "suspects": list(subset.suspects),
                    "devices": list(subset.devices),
                    "job_id": str(job.id),
                    "tries": 1,
                    "execution_id": None,
                    "verdict": None,
                }
                for subset, job in zip(decided.subsets, jobs, strict=True)
            ],
        },
    ]


def _lock_cohort(cohort: Cohort) -> None:
    ids = [UUID(d) for d in cohort.member_ids]
    lock_in_pk_order(Device, ids)
    jobs_expire_leases_holding(device_ids=ids, now=timezone.now())


@transaction.atomic
def isolation_dispatch(*, site: Site, topology_id: UUID, requirement_name: str, requested_by: str) -> IsolationPlan:
    """Start a plan and dispatch its first round (409 when a plan of this cohort is running or a
    device is held by another active job)."""
    cohort = cohort_load(site=site, topology_id=topology_id, requirement_name=requirement_name)
    _lock_cohort(cohort)
    now = timezone.now()
    state = start(cohort.member_ids)
    plan = IsolationPlan(
        id=uuid.uuid4(),
        site=site,
        topology=cohort.topology,
        requirement=cohort.requirement,
        policy_version=cohort.requirement.policy.version,
        cohort=cohort.member_ids,
        state=state.as_json(),
        rounds=[],
        max_rounds=max_rounds(len(cohort.devices)),
        requested_by=requested_by,
        created_at=now,
        updated_at=now,
    )
    try:
        with transaction.atomic():
            plan.save(force_insert=True)
    except IntegrityError as exc:
        raise Conflict(f"An isolation plan of {cohort.topology.label} / {cohort.requirement.name} is running.") from exc
    _dispatch_round(plan, cohort, state, requested_by)
    plan.save(update_fields=["rounds"])
    return plan


def _outcomes(plan: IsolationPlan) -> list[tuple[str | None, str | None]] | None:
    """(execution id, verdict) per subset of the current round, or None while any is undecided:
    its job is active, or its execution is not evaluated for its current `updated_at` yet. A job
    that ended without an execution is (None, errored): it never ran, which is no evidence about its
    devices. Two queries."""
    subsets = plan.rounds[-1]["subsets"]
    job_ids = [s["job_id"] for s in subsets]
    statuses = dict(Job.objects.filter(id__in=job_ids).values_list("id", "status"))
    if any(statuses.get(UUID(j)) in ACTIVE_JOB_STATUSES for j in job_ids):
        return None
    executions: dict[str, TestExecution] = {
        str(e.job_id): e
        for e in TestExecution.objects.filter(job_id__in=job_ids, requirement_id=plan.requirement_id)
        .select_related("evaluation")
        .order_by("created_at")
    }
    results: list[tuple[str | None, str | None]] = []
    for job_id in job_ids:
        execution = executions.get(job_id)
        if execution is None:
            results.append((None, Verdict.ERRORED))
            continue
        if execution.status == ExecutionStatus.RUNNING:
            return None
        evaluation: EvaluationResult | None = getattr(execution, "evaluation", None)
        if evaluation is None or evaluation.execution_updated_at != execution.updated_at:
            return None
        if execution.status == ExecutionStatus.ERRORED:
            verdict = Verdict.ERRORED
        else:
            verdict = Verdict.PASSED if evaluation.passed else Verdict.FAILED
        results.append((str(execution.id), verdict))
    return results


@transaction.atomic
def isolation_advance(*, site: Site, plan_id: UUID, requested_by: str) -> IsolationPlan:
    """Move the plan on if its current round is decided: record the outcomes, then dispatch the
    next round or finish. A plan still waiting, or finished, is returned as it is."""
    plan = IsolationPlan.objects.select_for_update().filter(id=plan_id, site=site).first()
    if plan is None:
        raise NotFoundError(f"No isolation plan {plan_id} at site {site.slug}.")
    if plan.status != IsolationStatus.RUNNING:
        return plan
    outcomes = _outcomes(plan)
    if outcomes is None:
        return plan
    state = IsolationState.from_json(plan.state)
    current = plan.rounds[-1]
    subsets = [Subset(s["group"], tuple(s["suspects"]), tuple(s["devices"])) for s in current["subsets"]]
    never_ran = [
        (index, subset)
        for index, (subset, (execution_id, _)) in enumerate(zip(subsets, outcomes, strict=True))
        if execution_id is None and current["subsets"][index].get("tries", 1) < NO_EVIDENCE_TRIES
    ]
    if never_ran:  # no evidence yet: those collectives run again, the round waits for them
        cohort = cohort_for_plan(plan)
        _lock_cohort(cohort)
        for (index, _), job in zip(
            never_ran, _subset_jobs(plan, cohort, len(plan.rounds), never_ran, requested_by), strict=True
        ):
            entry = current["subsets"][index]
            entry["job_id"], entry["tries"] = str(job.id), entry.get("tries", 1) + 1
        plan.updated_at = timezone.now()
        plan.save(update_fields=["rounds", "updated_at"])
        return plan
    for subset, (execution_id, verdict) in zip(current["subsets"], outcomes, strict=True):
        subset["execution_id"], subset["verdict"] = execution_id, verdict
    state = apply_round(
        state,
        RoundPlan(tuple(subsets)),
        [None if execution_id is None else verdict == Verdict.PASSED for execution_id, verdict in outcomes],
    )
    now = timezone.now()
    if not state.finished and state.rounds >= plan.max_rounds:
        state = give_up(state)
    if state.finished:
        _finish(plan, state, now)
    else:
        cohort = cohort_for_plan(plan)
        _lock_cohort(cohort)
        _dispatch_round(plan, cohort, state, requested_by)
    plan.state = state.as_json()
    plan.updated_at = now
    plan.save(update_fields=["state", "rounds", "status", "finished_at", "updated_at"])
    return plan


def cohort_for_plan(plan: IsolationPlan) -> Cohort:
    """The cohort a running plan works on, as it was when the plan started (its requirement's
    profile as of now)."""
    topology = Topology.objects.select_related("satellite").get(id=plan.topology_id)
    requirement = Requirement.objects.select_related("policy").get(id=plan.requirement_id)
    devices = {str(d.id): d for d in Device.objects.filter(id__in=plan.cohort)}
    profiles = sorted(
        ParameterProfile.objects.filter(resource_class=requirement.policy.resource_class, test=requirement.test),
        key=lambda p: (p.created_at, p.name),
        reverse=True,
    )
    profile = next((p for p in profiles if satisfies(p.parameters, requirement.parameter_constraints)), None)
    entry = {
        "name": requirement.name,
        "test": requirement.test,
        "parameters": dict(profile.parameters) if profile else {},
        "parameter_profile": {"id": str(profile.id), "name": profile.name} if profile else None,
    }
    site = Site.objects.get(id=plan.site_id)
    return Cohort(site, topology, requirement, devices, entry)


def _finish(plan: IsolationPlan, state: IsolationState, now) -> None:
    plan.status = IsolationStatus.FOUND if state.culprits else IsolationStatus.INCONCLUSIVE
    plan.finished_at = now
    rounds = state.rounds
    found = DeviceDiagnosis.objects.bulk_create(
        [
            DeviceDiagnosis(
                device_id=UUID(device_id),
                plan=plan,
                topology_id=plan.topology_id,
                requirement_id=plan.requirement_id,
                finding=(
                    f"its presence makes {plan.requirement.name} fail on {plan.topology.label} "
                    f"(isolated in {rounds} round{'s' if rounds != 1 else ''})"
                ),
                created_at=now,
            )
            for device_id in state.culprits
        ]
    )
    culprits = Device.objects.select_related("site").filter(id__in=[d.device_id for d in found]).order_by("id")
    events_record(
        [
            device_draft(
                EventType.ISOLATION_CULPRIT_FOUND,
                device,
                {
                    "plan_id": str(plan.id),
                    "requirement": plan.requirement.name,
                    "topology": plan.topology.label,
                    "rounds": rounds,
                },
                links={"isolation": f"/sites/{device.site.slug}/isolation/{plan.id}/"},
            )
            for device in culprits
        ],
        now=now,
    )
    # Named by isolation: the device goes to repair (behind the circuit breaker of its class).
    guarded_repair_moves_apply(
        [
            AutomaticMove(
                d.device_id,
                DeviceState.NEEDS_REPAIR,
                TransitionCause.ISOLATION,
                f"culprit isolation: {d.finding}",
                {"diagnosis_plan": str(plan.id), "requirement": plan.requirement.name, "topology": plan.topology.label},
            )
            for d in found
        ],
        now=now,
    )


def running_plan_id(*, site: Site, topology_id: UUID, requirement_name: str) -> UUID | None:
    """The plan isolating this cohort now, if one runs (one query): a second would be refused."""
    return (
        IsolationPlan.objects.filter(
            site=site, topology_id=topology_id, requirement__name=requirement_name, status=IsolationStatus.RUNNING
        )
        .values_list("id", flat=True)
        .first()
    )


def isolation_plan_get(*, site: Site, plan_id: UUID) -> IsolationPlan:
    plan = IsolationPlan.objects.select_related("topology", "requirement").filter(id=plan_id, site=site).first()
    if plan is None:
        raise NotFoundError(f"No isolation plan {plan_id} at site {site.slug}.")
    return plan


def hostnames(plan: IsolationPlan) -> dict[str, str]:
    """Device id → hostname for everything a plan names (one query)."""
    return {str(i): h for i, h in Device.objects.filter(id__in=plan.cohort).values_list("id", "hostname")}


def site_diagnoses(*, site: Site, device_id: UUID | None = None, limit: int = 100) -> list[DeviceDiagnosis]:
    """The newest diagnoses at the site (of one device, when given): one query."""
    rows = DeviceDiagnosis.objects.filter(device__site=site).select_related("device", "topology", "requirement", "plan")
    if device_id is not None:
        rows = rows.filter(device_id=device_id)
    return list(rows.order_by("-created_at", "-id")[:limit])


def _named(ids, names: dict[str, str]) -> list[dict[str, str]]:
    return [{"device_id": i, "hostname": names.get(i, i)} for i in ids]


def _round_data(number: int, subsets: list[dict[str, Any]], names: dict[str, str]) -> dict[str, Any]:
    return {
        "round": number,
        "subsets": [
            {
                "suspects": _named(s["suspects"], names),
                "devices": _named(s["devices"], names),
                "job_id": s.get("job_id"),
                "execution_id": s.get("execution_id"),
                "verdict": s.get("verdict"),
            }
            for s in subsets
        ],
    }


def preview_data(preview: IsolationPreview) -> dict[str, Any]:
    cohort = preview.cohort
    names = {i: d.hostname for i, d in cohort.devices.items()}
    subsets = [{"suspects": s.suspects, "devices": s.devices} for s in preview.first_round.subsets]
    return {
        "topology_id": cohort.topology.id,
        "topology_label": cohort.topology.label,
        "requirement": cohort.requirement.name,
        "cohort": _named(cohort.member_ids, names),
        "max_rounds": preview.max_rounds,
        "first_round": _round_data(1, subsets, names),
    }


def plan_data(plan: IsolationPlan) -> dict[str, Any]:
    """A plan as the API and the command show it, every device named (one query)."""
    names = hostnames(plan)
    state = IsolationState.from_json(plan.state)
    return {
        "id": plan.id,
        "site_id": plan.site_id,
        "topology_id": plan.topology_id,
        "topology_label": plan.topology.label,
        "requirement": plan.requirement.name,
        "policy_version": plan.policy_version,
        "status": plan.status,
        "cohort": _named(plan.cohort, names),
        "max_rounds": plan.max_rounds,
        "rounds": [_round_data(r["round"], r["subsets"], names) for r in plan.rounds],
        "suspects": _named(sorted({d for g in state.groups for d in g}), names),
        "known_good": _named(state.known_good, names),
        "culprits": _named(state.culprits, names),
        "unresolved": _named(sorted({d for g in state.unresolved for d in g}), names),
        "created_at": plan.created_at,
        "finished_at": plan.finished_at,
    }
