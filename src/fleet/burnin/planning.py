"""Rerun planning: pure decisions over loaded data (`rerun_dispatch` loads, then writes).

Given the selected devices and everything known about them, decide which jobs to create and
account for everything not dispatched, each with one typed reason:

* a device is **excluded** whole when its policy cannot rerun anything;
* each rerunnable single-node requirement is skipped by the first reason that applies, in the
  order of `SINGLE_NODE_CHAIN`; what is left becomes one `SingleNodeBurnInWorkflow` job per device;
* each rack-acceptance requirement is planned per topology cohort, as one
  `MultiNodeBurnInCollectiveWorkflow` job only when the whole cohort is selected, eligible, free
  and has passed every single-node requirement.

Every output list is sorted, so the same state always gives the same plan.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any
from uuid import UUID

from django.db import models

from fleet.inventory.models import BURN_IN_STATES
from fleet.jobs.models import WorkflowName


class PlanningMode(models.TextChoices):
    NON_PASSING = "non_passing", "NON_PASSING"
    ALL = "all", "ALL"


class SkipReason(models.TextChoices):
    PROJECTION_PENDING = "projection_pending", "PROJECTION_PENDING"
    ALREADY_SATISFIED = "already_satisfied", "ALREADY_SATISFIED"
    NO_POLICY_SATISFYING_PARAMETER_SOURCE = (
        "no_policy_satisfying_parameter_source",
        "NO_POLICY_SATISFYING_PARAMETER_SOURCE",
    )
    POLICY_CHANGED = "policy_changed", "POLICY_CHANGED"
    WORKFLOW_UNAVAILABLE = "workflow_unavailable", "WORKFLOW_UNAVAILABLE"
    DEVICE_INELIGIBLE = "device_ineligible", "DEVICE_INELIGIBLE"
    DEVICE_CONTENDED = "device_contended", "DEVICE_CONTENDED"
    ALREADY_DISPATCHED = "already_dispatched", "ALREADY_DISPATCHED"
    TOPOLOGY_COHORT_BLOCKED = "topology_cohort_blocked", "TOPOLOGY_COHORT_BLOCKED"


class ExclusionReason(models.TextChoices):
    NO_ACCEPTANCE_POLICY = "no_acceptance_policy", "NO_ACCEPTANCE_POLICY"
    NO_SINGLE_NODE_REQUIREMENTS = "no_single_node_requirements", "NO_SINGLE_NODE_REQUIREMENTS"
    NO_RERUN_REQUIREMENTS = "no_rerun_requirements", "NO_RERUN_REQUIREMENTS"


#: The single-node skip reasons, in precedence order (first match wins).
SINGLE_NODE_CHAIN = (
    SkipReason.DEVICE_INELIGIBLE,
    SkipReason.WORKFLOW_UNAVAILABLE,
    SkipReason.POLICY_CHANGED,
    SkipReason.PROJECTION_PENDING,
    SkipReason.ALREADY_SATISFIED,
    SkipReason.ALREADY_DISPATCHED,
    SkipReason.DEVICE_CONTENDED,
    SkipReason.NO_POLICY_SATISFYING_PARAMETER_SOURCE,
)


# --- what planning reads ------------------------------------------------------------------------


@dataclass(frozen=True)
class DeviceFacts:
    id: UUID
    hostname: str
    site_id: UUID
    satellite_id: UUID
    resource_class: str
    state: str
    enrolled: bool
    topologies: Mapping[str, UUID] = field(default_factory=dict)  # unit → topology id

    @property
    def eligible(self) -> bool:
        return self.enrolled and self.state in BURN_IN_STATES


@dataclass(frozen=True)
class RequirementFacts:
    id: UUID
    name: str
    gate: str
    scope: str
    unit: str | None
    test: str
    rerunnable: bool
    parameter_constraints: Mapping[str, Any] = field(default_factory=dict)

    @property
    def multi_node(self) -> bool:
        return self.scope == "multi_node"


@dataclass(frozen=True)
class PolicyFacts:
    resource_class: str
    version: int
    requirements: tuple[RequirementFacts, ...]  # not retired

    @property
    def single_node(self) -> tuple[RequirementFacts, ...]:
        return tuple(r for r in self.requirements if not r.multi_node)


@dataclass(frozen=True)
class ProgressFacts:
    verdict: str
    policy_version: int
    execution_id: UUID | None


@dataclass(frozen=True)
class ActiveJobFacts:
    job_id: UUID
    workflow_name: str
    requirement_names: frozenset[str]
    topology_id: UUID | None = None


@dataclass(frozen=True)
class ProfileFacts:
    id: UUID
    resource_class: str
    test: str
    name: str
    parameters: Mapping[str, Any]
    created_at: datetime


@dataclass(frozen=True)
class TopologyFacts:
    id: UUID
    unit: str
    label: str
    satellite_id: UUID


@dataclass(frozen=True)
class PlanningInput:
    selected: tuple[UUID, ...]
    mode: str
    devices: Mapping[UUID, DeviceFacts]  # the selected devices and every cohort member
    policies: Mapping[str, PolicyFacts]  # by resource class
    progress: Mapping[tuple[UUID, UUID], ProgressFacts]  # (requirement, target) → row
    latest_executions: Mapping[tuple[UUID, UUID], UUID]  # (requirement, target) → execution id
    active_jobs: Mapping[UUID, ActiveJobFacts]  # device → the active job holding it
    profiles: Sequence[ProfileFacts]
    topologies: Mapping[UUID, TopologyFacts]
    workflows: Mapping[UUID, frozenset[str]]  # satellite → advertised workflow names


# --- what planning decides ----------------------------------------------------------------------


@dataclass(frozen=True)
class PlannedRequirement:
    name: str
    test: str
    parameters: Mapping[str, Any]
    profile_id: UUID
    profile_name: str


@dataclass(frozen=True)
class PlannedJob:
    workflow_name: str
    site_id: UUID
    satellite_id: UUID
    resource_class: str
    policy_version: int
    device_ids: tuple[UUID, ...]
    requirements: tuple[PlannedRequirement, ...]
    topology_id: UUID | None = None

    def parameters(self) -> dict[str, Any]:
        """What the job carries to the agent."""
        return {
            "resource_class": self.resource_class,
            "policy_version": self.policy_version,
            "requirements": [
                {
                    "name": r.name,
                    "test": r.test,
                    "parameters": dict(r.parameters),
                    "parameter_profile": {"id": str(r.profile_id), "name": r.profile_name},
                }
                for r in self.requirements
            ],
        }


@dataclass(frozen=True)
class SkipGroup:
    topology_id: UUID | None
    resource_class: str
    requirement_name: str
    reason: str
    device_ids: tuple[UUID, ...]


@dataclass(frozen=True)
class Exclusion:
    device_id: UUID
    reason: str


@dataclass(frozen=True)
class Plan:
    jobs: tuple[PlannedJob, ...]
    skips: tuple[SkipGroup, ...]
    exclusions: tuple[Exclusion, ...]


# --- decisions ---------------------------------------------------------------------------------


def satisfies(parameters: Mapping[str, Any], constraints: Mapping[str, Any]) -> bool:
    """Whether a parameter set meets constraints like `{"duration_s": {"gte": 3600}}`; a missing
    parameter never does."""
    for name, condition in constraints.items():
        if name not in parameters:
            return False
        value = parameters[name]
        for operator, bound in condition.items():
            try:
                ok = {
                    "eq": lambda v, b: v == b,
                    "ne": lambda v, b: v != b,
                    "gt": lambda v, b: v > b,
                    "gte": lambda v, b: v >= b,
                    "lt": lambda v, b: v < b,
                    "lte": lambda v, b: v <= b,
                    "in": lambda v, b: v in b,
                }[operator](value, bound)
            except (TypeError, KeyError):
                ok = False
            if not ok:
                return False
    return True


def choose_profile(
    profiles: Sequence[ProfileFacts], resource_class: str, requirement: RequirementFacts
) -> ProfileFacts | None:
    """The newest profile of the resource class and test that satisfies the constraints."""
    candidates = [p for p in profiles if p.resource_class == resource_class and p.test == requirement.test]
    candidates.sort(key=lambda p: (p.created_at, p.name), reverse=True)
    return next((p for p in candidates if satisfies(p.parameters, requirement.parameter_constraints)), None)


def exclusion_of(device: DeviceFacts, policy: PolicyFacts | None) -> str | None:
    if policy is None:
        return ExclusionReason.NO_ACCEPTANCE_POLICY
    if not policy.single_node:
        return ExclusionReason.NO_SINGLE_NODE_REQUIREMENTS
    if not any(r.rerunnable for r in policy.requirements):
        return ExclusionReason.NO_RERUN_REQUIREMENTS
    return None


def _row_reason(data: PlanningInput, policy: PolicyFacts, requirement: RequirementFacts, target_id: UUID) -> str | None:
    """The projection-based reasons, shared by single-node targets and cohorts."""
    row = data.progress.get((requirement.id, target_id))
    if row is not None and row.policy_version != policy.version:
        return SkipReason.POLICY_CHANGED
    latest = data.latest_executions.get((requirement.id, target_id))
    if row is None or row.execution_id != latest:
        return SkipReason.PROJECTION_PENDING
    if data.mode == PlanningMode.NON_PASSING and row.verdict == "passed":
        return SkipReason.ALREADY_SATISFIED
    return None


def single_node_reason(
    data: PlanningInput, device: DeviceFacts, policy: PolicyFacts, requirement: RequirementFacts
) -> str | None:
    """The first reason in SINGLE_NODE_CHAIN that applies, or None to dispatch."""
    if not device.eligible:
        return SkipReason.DEVICE_INELIGIBLE
    if WorkflowName.SINGLE_NODE not in data.workflows.get(device.satellite_id, frozenset()):
        return SkipReason.WORKFLOW_UNAVAILABLE
    reason = _row_reason(data, policy, requirement, device.id)
    if reason:
        return reason
    holder = data.active_jobs.get(device.id)
    if holder is not None:
        covered = holder.workflow_name == WorkflowName.SINGLE_NODE and requirement.name in holder.requirement_names
        return SkipReason.ALREADY_DISPATCHED if covered else SkipReason.DEVICE_CONTENDED
    if choose_profile(data.profiles, device.resource_class, requirement) is None:
        return SkipReason.NO_POLICY_SATISFYING_PARAMETER_SOURCE
    return None


def _passed_single_node(data: PlanningInput, policy: PolicyFacts, device_id: UUID) -> bool:
    return all(
        (row := data.progress.get((r.id, device_id))) is not None
        and row.verdict == "passed"
        and row.policy_version == policy.version
        for r in policy.single_node
    )


def cohort_reason(
    data: PlanningInput,
    policy: PolicyFacts,
    requirement: RequirementFacts,
    topology: TopologyFacts,
    members: Sequence[DeviceFacts],
    busy: set[UUID],
    selected: set[UUID],
) -> str | None:
    """Why a cohort cannot run as one collective job now, or None to dispatch it."""
    if WorkflowName.MULTI_NODE_COLLECTIVE not in data.workflows.get(topology.satellite_id, frozenset()):
        return SkipReason.WORKFLOW_UNAVAILABLE
    reason = _row_reason(data, policy, requirement, topology.id)
    if reason:
        return reason
    holders = {data.active_jobs[m.id] for m in members if m.id in data.active_jobs}
    if any(h.topology_id == topology.id and requirement.name in h.requirement_names for h in holders):
        return SkipReason.ALREADY_DISPATCHED
    whole_cohort_ok = all(
        m.id in selected
        and m.eligible
        and m.id not in data.active_jobs
        and m.id not in busy
        and _passed_single_node(data, policy, m.id)
        for m in members
    )
    if not whole_cohort_ok:
        return SkipReason.TOPOLOGY_COHORT_BLOCKED
    if choose_profile(data.profiles, policy.resource_class, requirement) is None:
        return SkipReason.NO_POLICY_SATISFYING_PARAMETER_SOURCE
    return None


def cohort_index(data: PlanningInput) -> dict[tuple[str, UUID, str], list[DeviceFacts]]:
    """(unit, topology, resource class) → every enrolled device of that class in the topology,
    built once so planning stays linear in the number of devices."""
    cohorts: dict[tuple[str, UUID, str], list[DeviceFacts]] = defaultdict(list)
    for device in sorted(data.devices.values(), key=lambda d: str(d.id)):
        if device.enrolled:
            for unit, topology_id in device.topologies.items():
                cohorts[(unit, topology_id, device.resource_class)].append(device)
    return cohorts


def plan(data: PlanningInput) -> Plan:
    exclusions: list[Exclusion] = []
    skips: dict[tuple[UUID | None, str, str, str], set[UUID]] = defaultdict(set)
    jobs: list[PlannedJob] = []
    busy: set[UUID] = set()  # devices given a job in this plan
    planned_cohorts: set[tuple[UUID, UUID]] = set()

    selected = [data.devices[d] for d in dict.fromkeys(data.selected)]
    for device in sorted(selected, key=lambda d: str(d.id)):
        policy = data.policies.get(device.resource_class)
        reason = exclusion_of(device, policy)
        if reason:
            exclusions.append(Exclusion(device.id, reason))
            continue
        remaining = []
        for requirement in policy.single_node:
            if not requirement.rerunnable:
                continue
            skip = single_node_reason(data, device, policy, requirement)
            if skip:
                skips[(None, device.resource_class, requirement.name, skip)].add(device.id)
            else:
                profile = choose_profile(data.profiles, device.resource_class, requirement)
                remaining.append(
                    PlannedRequirement(requirement.name, requirement.test, profile.parameters, profile.id, profile.name)
                )
        if remaining:
            jobs.append(
                PlannedJob(
                    workflow_name=WorkflowName.SINGLE_NODE,
                    site_id=device.site_id,
                    satellite_id=device.satellite_id,
                    resource_class=device.resource_class,
                    policy_version=policy.version,
                    device_ids=(device.id,),
                    requirements=tuple(remaining),
                )
            )
            busy.add(device.id)

    excluded = {e.device_id for e in exclusions}
    cohorts = cohort_index(data)
    selected_ids = {d.id for d in selected}
    for device in sorted(selected, key=lambda d: str(d.id)):
        if device.id in excluded:
            continue
        policy = data.policies[device.resource_class]
        for requirement in policy.requirements:
            if not (requirement.multi_node and requirement.rerunnable):
                continue
            topology_id = device.topologies.get(requirement.unit)
            topology = data.topologies.get(topology_id) if topology_id else None
            if topology is None:
                skips[(None, device.resource_class, requirement.name, SkipReason.TOPOLOGY_COHORT_BLOCKED)].add(
                    device.id
                )
                continue
            if (requirement.id, topology.id) in planned_cohorts:
                continue
            planned_cohorts.add((requirement.id, topology.id))
            members = cohorts.get((requirement.unit, topology.id, policy.resource_class), [])
            selected_members = sorted(selected_ids & {m.id for m in members}, key=str)
            reason = cohort_reason(data, policy, requirement, topology, members, busy, selected_ids)
            if reason:
                skips[(topology.id, policy.resource_class, requirement.name, reason)].update(selected_members)
                continue
            profile = choose_profile(data.profiles, policy.resource_class, requirement)
            jobs.append(
                PlannedJob(
                    workflow_name=WorkflowName.MULTI_NODE_COLLECTIVE,
                    site_id=device.site_id,
                    satellite_id=topology.satellite_id,
                    resource_class=policy.resource_class,
                    policy_version=policy.version,
                    device_ids=tuple(m.id for m in members),
                    requirements=(
                        PlannedRequirement(
                            requirement.name, requirement.test, profile.parameters, profile.id, profile.name
                        ),
                    ),
                    topology_id=topology.id,
                )
            )
            busy.update(m.id for m in members)

    def topology_label(topology_id: UUID | None) -> str:
        return data.topologies[topology_id].label if topology_id in data.topologies else ""

    skip_groups = sorted(
        (
            SkipGroup(topology_id, rc, name, reason, tuple(sorted(devices, key=str)))
            for (topology_id, rc, name, reason), devices in skips.items()
            if devices
        ),
        key=lambda g: (topology_label(g.topology_id), g.resource_class, g.requirement_name, g.reason),
    )
    jobs.sort(key=lambda j: (j.workflow_name, topology_label(j.topology_id), [str(d) for d in j.device_ids]))
    return Plan(jobs=tuple(jobs), skips=tuple(skip_groups), exclusions=tuple(exclusions))
