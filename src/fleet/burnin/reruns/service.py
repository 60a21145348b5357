"""`rerun_plan_preview` and `rerun_dispatch`: load → plan → (dispatch only) create the plan's
jobs through the standard Job path, under the devices' locks."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from uuid import UUID

from django.db import transaction
from django.utils import timezone

from fleet.burnin import metrics
from fleet.burnin.reruns.load import check_selection, load_planning_input, lock_involved_devices
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
) -> DispatchOutcome:
    selected = check_selection(site, device_ids)
    involved = lock_involved_devices(selected)
    jobs_expire_leases_holding(device_ids=involved, now=timezone.now())
    decided = plan(load_planning_input(selected=selected, mode=mode, only=only))
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
