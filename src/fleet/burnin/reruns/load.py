"""What rerun planning reads, in a constant number of queries whatever the selection's size."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from uuid import UUID

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db.models import Q

from fleet.burnin.models import PolicyProgress
from fleet.burnin.selectors import TargetKey, latest_execution_ids
from fleet.inventory.models import Device, Satellite, Site, Topology, TopologyMembership
from fleet.jobs.models import Job, JobDevice
from fleet.policies.models import AcceptancePolicy, ParameterProfile, Requirement
from fleet_rules.planning import (
    ActiveJobFacts,
    DeviceFacts,
    PlanningInput,
    PolicyFacts,
    ProfileFacts,
    ProgressFacts,
    RequirementFacts,
    TopologyFacts,
)
from fleet_rules.vocabulary import Verdict


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


def involved_devices(selected: list[UUID]) -> set[UUID]:
    """The selection plus every device sharing one of its topologies (cohort members)."""
    topologies = TopologyMembership.objects.filter(device_id__in=selected).values("topology_id")
    members = TopologyMembership.objects.filter(topology_id__in=topologies).values_list("device_id", flat=True)
    return set(selected) | set(members)


def _memberships(device_ids: set[UUID]) -> dict[UUID, dict[str, UUID]]:
    by_device: dict[UUID, dict[str, UUID]] = defaultdict(dict)
    for device_id, unit, topology_id in TopologyMembership.objects.filter(device_id__in=device_ids).values_list(
        "device_id", "unit", "topology_id"
    ):
        by_device[device_id][unit] = topology_id
    return by_device


#: The device columns planning reads; rows come as tuples (model instances cost ~25 µs each,
#: a quarter of a 10,000-device preview).
_DEVICE_FIELDS = ("id", "hostname", "site_id", "satellite_id", "resource_class", "state", "enrolled_at")


def load_planning_input(*, selected: list[UUID], mode: str, involved: set[UUID]) -> PlanningInput:
    memberships = _memberships(involved)
    device_rows = list(Device.objects.filter(id__in=involved).values_list(*_DEVICE_FIELDS))
    devices = {
        device_id: DeviceFacts(
            device_id,
            hostname,
            site_id,
            satellite_id,
            resource_class,
            state,
            enrolled_at,
            memberships.get(device_id, {}),
        )
        for device_id, hostname, site_id, satellite_id, resource_class, state, enrolled_at in device_rows
    }
    topology_ids = {t for units in memberships.values() for t in units.values()}
    topologies = {
        t.id: TopologyFacts(t.id, t.unit, t.label, t.satellite_id) for t in Topology.objects.filter(id__in=topology_ids)
    }
    resource_classes = {d.resource_class for d in devices.values()}
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
        (requirement_id, target_id): ProgressFacts(verdict, version, execution_id)
        for requirement_id, target_id, verdict, version, execution_id in PolicyProgress.objects.filter(
            requirement_id__in=requirement_ids, target_id__in=targets
        ).values_list("requirement_id", "target_id", "verdict", "policy_version", "execution_id")
    }
    single_node = {rc: p.single_node for rc, p in policies.items()}
    keys = [
        TargetKey(r.id, d.id, is_device=True)
        for d in devices.values()
        if d.resource_class in single_node
        for r in single_node[d.resource_class]
    ] + [
        TargetKey(r.id, t.id, is_device=False)
        for p in policies.values()
        for r in p.requirements
        if r.multi_node
        for t in topologies.values()
        if t.unit == r.unit
    ]
    latest = latest_execution_ids(keys)
    active_jobs = {
        device_id: ActiveJobFacts(job_id, workflow, frozenset(Job.requirement_names_of(parameters)), topology_id)
        for device_id, job_id, workflow, parameters, topology_id in JobDevice.objects.filter(
            active=True, device_id__in=involved
        ).values_list("device_id", "job_id", "job__workflow_name", "job__parameters", "job__topology_id")
    }
    profiles = [
        ProfileFacts(p.id, p.resource_class, p.test, p.name, p.parameters, p.created_at)
        for p in ParameterProfile.objects.filter(resource_class__in=resource_classes)
    ]
    satellite_ids = {d.satellite_id for d in devices.values()} | {t.satellite_id for t in topologies.values()}
    workflows = {
        s.id: frozenset(w.get("name") for w in s.advertised_workflows or [])
        for s in Satellite.objects.filter(id__in=satellite_ids).only("id", "advertised_workflows")
    }
    return PlanningInput(
        selected=tuple(selected),
        mode=mode,
        devices=devices,
        policies=policies,
        progress=progress,
        latest_executions=latest,
        active_jobs=active_jobs,
        profiles=profiles,
        topologies=topologies,
        workflows=workflows,
    )


# --- selections people make -------------------------------------------------------------------------


def failing_devices(site: Site) -> list[UUID]:
    """Every device at the site with a failed or errored requirement, its own or its rack's (one
    query): what `fleet rerun --all-failed` and the dashboard's "every failing device" select."""
    failing = PolicyProgress.objects.filter(site=site, verdict__in=[Verdict.FAILED, Verdict.ERRORED])
    return list(
        Device.objects.filter(site=site)
        .filter(
            Q(id__in=failing.filter(device__isnull=False).values("device_id"))
            | Q(memberships__topology_id__in=failing.filter(topology__isnull=False).values("topology_id"))
        )
        .distinct()
        .order_by("hostname")
        .values_list("id", flat=True)
    )


def topology_devices(site: Site, label: str) -> list[UUID]:
    """Every device of the site's topologies with this label (one query); empty if there is none."""
    return list(
        Device.objects.filter(site=site, memberships__topology__label=label)
        .distinct()
        .order_by("hostname")
        .values_list("id", flat=True)
    )
