"""`rerun_plan_preview` and `rerun_dispatch`: load → plan → (dispatch only) create the plan's
jobs through the standard Job path, under the devices' locks."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from uuid import UUID

from django.db import transaction
from django.utils import timezone

from fleet.burnin import metrics
from fleet.burnin.reruns.load import check_selection, load_planning_input, lock_involved_devices
from fleet.burnin.reruns.selection import device_hostnames
from fleet.core.exceptions import Conflict
from fleet.core.heap import collector_paused
from fleet.inventory.models import Site
from fleet.jobs.services import JobSpec, jobs_create, jobs_expire_leases_holding
from fleet_rules.planning import Plan, PlannedJob, TopologyFacts, plan
from fleet_rules.vocabulary import JobReason, PlanningMode, WorkflowName


@dataclass(frozen=True)
class CreatedJob:
    """A job a dispatch created, as the response names it."""

    job_id: UUID
    workflow_name: WorkflowName
    topology: TopologyFacts | None
    device_ids: tuple[UUID, ...]


@dataclass(frozen=True)
class DispatchOutcome:
    plan: Plan
    created_jobs: tuple[CreatedJob, ...]  # in the order of plan.jobs; empty for a preview

    @property
    def planned_jobs(self) -> tuple[PlannedJob, ...]:
        return self.plan.jobs

    @property
    def touched(self) -> list[UUID]:
        """Every device the plan's jobs would hold, in a stable order."""
        return touched_by(self.plan)

    @property
    def key(self) -> str:
        """`<devices>:<sha256 of their ids>`: what a preview's form carries, so that its dispatch
        acts only on the plan the person saw and confirmed."""
        return plan_key(self.plan)


def touched_by(decided: Plan) -> list[UUID]:
    return sorted({d for job in decided.jobs for d in job.device_ids}, key=str)


def plan_key(decided: Plan) -> str:
    touched = touched_by(decided)
    return f"{len(touched)}:{hashlib.sha256(','.join(map(str, touched)).encode()).hexdigest()}"


class PlanChanged(Conflict):
    """The plan would now touch other devices than its preview named (409, nothing created)."""


@collector_paused()
def rerun_plan_preview(
    *, site: Site, device_ids: Sequence[UUID], mode: PlanningMode, only: Mapping[UUID, frozenset[str]] | None = None
) -> DispatchOutcome:
    """What a dispatch would create now. `only` narrows devices to some requirements (ticked
    failure rows, `selection.selection_only`); the API plans every requirement of its devices."""
    selected = check_selection(site, device_ids)
    data = load_planning_input(selected=selected, mode=mode, only=only)
    return DispatchOutcome(plan=plan(data), created_jobs=())


@collector_paused()  # the facts and plan of up to RERUN_MAX_DEVICES devices (fleet.core.heap)
@transaction.atomic
def rerun_dispatch(
    *,
    site: Site,
    device_ids: Sequence[UUID],
    mode: PlanningMode,
    requested_by: str,
    only: Mapping[UUID, frozenset[str]] | None = None,
    expect: str | None = None,
) -> DispatchOutcome:
    """Plan under the devices' locks and create the plan's jobs. `only` narrows devices to some
    requirements (as the preview's). With `expect` (the `plan_key` of the preview a person
    confirmed), a plan that would hold other devices is refused (`PlanChanged`): a click never
    does more, or other, than its preview said."""
    selected = check_selection(site, device_ids)
    involved = lock_involved_devices(selected)
    jobs_expire_leases_holding(device_ids=involved, now=timezone.now())
    decided = plan(load_planning_input(selected=selected, mode=mode, only=only))
    if expect is not None and plan_key(decided) != expect:
        names = ", ".join(sorted(device_hostnames(touched_by(decided)).values())) or "no device"
        raise PlanChanged(
            f"The plan changed since its preview: it would now touch {names}. Nothing was dispatched; preview again."
        )
    specs = [
        JobSpec(
            site_id=job.site_id,
            satellite_id=job.satellite_id,
            workflow_name=job.workflow_name,
            device_ids=job.device_ids,
            parameters=job.parameters(),
            topology_id=job.topology_id,
        )
        for job in decided.jobs
    ]
    jobs = jobs_create(specs=specs, requested_by=requested_by, reason=JobReason.DISPATCH, locked=True)
    created = tuple(
        CreatedJob(job.id, planned.workflow_name, planned.topology, planned.device_ids)
        for planned, job in zip(decided.jobs, jobs, strict=True)
    )
    metrics.dispatch_counted(decided)
    return DispatchOutcome(plan=decided, created_jobs=created)


def dispatch_record(outcome: DispatchOutcome) -> dict[str, Any]:
    """What a dispatch did, as JSON its receipt keeps for the result page (the shape of
    `DispatchOutcome` the templates read, ids as text), every device named (one query)."""
    decided = outcome.plan
    ids = {d for j in outcome.created_jobs for d in j.device_ids}
    ids |= {d for g in decided.skips for d in g.device_ids} | {e.device_id for e in decided.exclusions}

    def topology(facts: TopologyFacts | None) -> dict[str, str] | None:
        return {"label": facts.label} if facts else None

    return {
        "created_jobs": [
            {
                "job_id": str(j.job_id),
                "workflow_name": str(j.workflow_name),
                "topology": topology(j.topology),
                "device_ids": [str(d) for d in j.device_ids],
            }
            for j in outcome.created_jobs
        ],
        "plan": {
            "skips": [
                {
                    "reason": str(g.reason),
                    "requirement_name": g.requirement_name,
                    "resource_class": g.resource_class,
                    "topology": topology(g.topology),
                    "device_ids": [str(d) for d in g.device_ids],
                }
                for g in decided.skips
            ],
            "exclusions": [{"device_id": str(e.device_id), "reason": str(e.reason)} for e in decided.exclusions],
        },
        "hostnames": {str(i): name for i, name in device_hostnames(ids).items()},
    }
