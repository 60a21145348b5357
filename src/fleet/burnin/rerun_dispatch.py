"""Rerun planning and dispatch: load → plan (pure, `planning`) → write through the Job path.

Dispatch runs in one transaction that first locks the selected devices and every member of
their cohorts in primary-key order, then reads everything planning needs under those locks, so
two concurrent dispatches over overlapping devices serialise and never create two active jobs
for one device. The number of queries does not depend on how many devices are selected.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from uuid import UUID

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils import timezone

from fleet.burnin.models import PolicyProgress
from fleet.burnin.planning import (
    ActiveJobFacts,
    DeviceFacts,
    Plan,
    PlanningInput,
    PolicyFacts,
    ProfileFacts,
    ProgressFacts,
    RequirementFacts,
    TopologyFacts,
    plan,
)
from fleet.burnin.selectors import latest_execution_ids
from fleet.core.locks import lock_in_pk_order
from fleet.inventory.models import Device, Satellite, Site, Topology, TopologyMembership
from fleet.jobs.models import Job, JobDevice
from fleet.jobs.services import JobSpec, jobs_create, jobs_expire_leases_holding
from fleet.policies.models import AcceptancePolicy, ParameterProfile, Requirement


@dataclass(frozen=True)
class DispatchOutcome:
    plan: Plan
    jobs: tuple[Job, ...]  # in the order of plan.jobs; empty for a preview
    topologies: Mapping[UUID, TopologyFacts]  # every topology the plan names


def check_selection(site: Site, device_ids: Sequence[UUID]) -> list[UUID]:
    """The selection without duplicates; a 400 naming `device_ids.N` for every id not at the site."""
    limit = settings.FLEET["RERUN_MAX_DEVICES"]
    if len(device_ids) > limit:
        raise ValidationError({"device_ids": [f"At most {limit} devices per request; got {len(device_ids)}."]})
    unique = list(dict.fromkeys(device_ids))
    at_site = set(Device.objects.filter(site=site, id__in=unique).values_list("id", flat=True))
    problems = {
        f"device_ids.{index}": [f"{device_id} is not a device of site {site.slug}."]
        for index, device_id in enumerate(device_ids)
        if device_id not in at_site
    }
    if problems:
        raise ValidationError(problems)
    return unique


def _memberships(device_ids: set[UUID]) -> dict[UUID, dict[str, UUID]]:
    by_device: dict[UUID, dict[str, UUID]] = defaultdict(dict)
    for device_id, unit, topology_id in TopologyMembership.objects.filter(device_id__in=device_ids).values_list(
        "device_id", "unit", "topology_id"
    ):
        by_device[device_id][unit] = topology_id
    return by_device


def _involved_devices(selected: list[UUID]) -> set[UUID]:
    """The selection plus every device sharing one of its topologies (cohort members)."""
    topologies = TopologyMembership.objects.filter(device_id__in=selected).values("topology_id")
    members = TopologyMembership.objects.filter(topology_id__in=topologies).values_list("device_id", flat=True)
    return set(selected) | set(members)


def load_planning_input(*, selected: list[UUID], mode: str, involved: set[UUID]) -> PlanningInput:
    devices = list(Device.objects.filter(id__in=involved))
    memberships = _memberships(involved)
    topology_ids = {t for units in memberships.values() for t in units.values()}
    topologies = {
        t.id: TopologyFacts(t.id, t.unit, t.label, t.satellite_id) for t in Topology.objects.filter(id__in=topology_ids)
    }
    resource_classes = {d.resource_class for d in devices}
    requirements_by_policy: dict[UUID, list[RequirementFacts]] = defaultdict(list)
    policies_raw = list(AcceptancePolicy.objects.filter(resource_class__in=resource_classes))
    for r in Requirement.objects.filter(policy__in=policies_raw, retired_at__isnull=True).order_by("name"):
        requirements_by_policy[r.policy_id].append(
            RequirementFacts(r.id, r.name, r.gate, r.scope, r.unit, r.test, r.rerunnable, r.parameter_constraints)
        )
    policies = {
        p.resource_class: PolicyFacts(p.resource_class, p.version, tuple(requirements_by_policy[p.id]))
        for p in policies_raw
    }
    requirement_ids = [r.id for p in policies.values() for r in p.requirements]
    targets = involved | topology_ids
    progress = {
        (row.requirement_id, row.target_id): ProgressFacts(row.verdict, row.policy_version, row.execution_id)
        for row in PolicyProgress.objects.filter(requirement_id__in=requirement_ids, target_id__in=targets).only(
            "requirement_id", "target_id", "verdict", "policy_version", "execution_id"
        )
    }
    pairs = [
        (r.id, d.id, True)
        for d in devices
        if d.resource_class in policies
        for r in policies[d.resource_class].single_node
    ] + [
        (r.id, t.id, False)
        for p in policies.values()
        for r in p.requirements
        if r.multi_node
        for t in topologies.values()
        if t.unit == r.unit
    ]
    latest = latest_execution_ids(pairs)
    active_jobs = {
        row.device_id: ActiveJobFacts(
            row.job_id, row.job.workflow_name, frozenset(row.job.requirement_names), row.job.topology_id
        )
        for row in JobDevice.objects.filter(active=True, device_id__in=involved).select_related("job")
    }
    profiles = [
        ProfileFacts(p.id, p.resource_class, p.test, p.name, p.parameters, p.created_at)
        for p in ParameterProfile.objects.filter(resource_class__in=resource_classes)
    ]
    satellite_ids = {d.satellite_id for d in devices} | {t.satellite_id for t in topologies.values()}
    workflows = {
        s.id: frozenset(w.get("name") for w in s.advertised_workflows or [])
        for s in Satellite.objects.filter(id__in=satellite_ids).only("id", "advertised_workflows")
    }
    return PlanningInput(
        selected=tuple(selected),
        mode=mode,
        devices={
            d.id: DeviceFacts(
                d.id,
                d.hostname,
                d.site_id,
                d.satellite_id,
                d.resource_class,
                d.state,
                d.is_enrolled,
                memberships.get(d.id, {}),
            )
            for d in devices
        },
        policies=policies,
        progress=progress,
        latest_executions=latest,
        active_jobs=active_jobs,
        profiles=profiles,
        topologies=topologies,
        workflows=workflows,
    )


def rerun_plan_preview(*, site: Site, device_ids: Sequence[UUID], mode: str) -> DispatchOutcome:
    selected = check_selection(site, device_ids)
    data = load_planning_input(selected=selected, mode=mode, involved=_involved_devices(selected))
    return DispatchOutcome(plan=plan(data), jobs=(), topologies=data.topologies)


@transaction.atomic
def rerun_dispatch(*, site: Site, device_ids: Sequence[UUID], mode: str, requested_by: str) -> DispatchOutcome:
    selected = check_selection(site, device_ids)
    involved = _involved_devices(selected)
    lock_in_pk_order(Device, involved)
    jobs_expire_leases_holding(device_ids=involved, now=timezone.now())
    data = load_planning_input(selected=selected, mode=mode, involved=involved)
    decided = plan(data)
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
    jobs = jobs_create(specs=specs, requested_by=requested_by, reason="dispatch", locked=True)
    return DispatchOutcome(plan=decided, jobs=tuple(jobs), topologies=data.topologies)
