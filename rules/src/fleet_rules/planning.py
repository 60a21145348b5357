"""Rerun planning: which jobs to create for a selection of devices, and why everything else is not
dispatched.

Two passes over facts loaded under the devices' locks:

* **single-node**: a device is *excluded* whole when its policy cannot rerun anything; each
  rerunnable single-node requirement is skipped by the first reason of `SINGLE_NODE_CHAIN` that
  applies; what is left becomes one `SingleNodeBurnInWorkflow` job per device;
* **cohorts**: each rack-acceptance requirement is planned per topology cohort, as one
  `MultiNodeBurnInCollectiveWorkflow` job only when the whole cohort is selected, eligible, free
  (no active job, none given by the first pass) and has passed every single-node requirement.

A selection may narrow devices to some requirements (`PlanningInput.only`, ticked failure rows);
the others are neither planned nor listed as skipped. Every output list is sorted, so the same
state always gives the same plan.
"""

from __future__ import annotations

import operator
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from functools import cached_property
from typing import Any
from uuid import UUID

from fleet_rules.eligibility import is_burn_in_eligible, is_enrolled
from fleet_rules.vocabulary import (
    ConstraintOperator,
    ExclusionReason,
    PlanningMode,
    RequirementScope,
    SkipReason,
    Verdict,
    WorkflowName,
)

#: The single-node skip reasons, in precedence order (first match wins).
SINGLE_NODE_CHAIN: tuple[SkipReason, ...] = (
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
    enrolled_at: datetime | None
    topologies: Mapping[str, UUID] = field(default_factory=dict)  # unit → topology id

    @property
    def enrolled(self) -> bool:
        return is_enrolled(enrolled_at=self.enrolled_at, state=self.state)

    @property
    def eligible(self) -> bool:
        return is_burn_in_eligible(enrolled_at=self.enrolled_at, state=self.state)


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
        return self.scope == RequirementScope.MULTI_NODE


@dataclass(frozen=True)
class PolicyFacts:
    resource_class: str
    version: int
    requirements: tuple[RequirementFacts, ...]  # not retired

    @cached_property
    def single_node(self) -> tuple[RequirementFacts, ...]:
        return tuple(r for r in self.requirements if not r.multi_node)


@dataclass(frozen=True)
class ProgressFacts:
    verdict: str
    policy_version: int
    #: The row decided the target's latest execution (or there is none, and the row decided
    #: none); otherwise a newer execution is not reconciled yet.
    decides_latest: bool


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


#: A topology cohort: (unit, topology, resource class).
CohortKey = tuple[str, UUID, str]


@dataclass(frozen=True)
class PlanningInput:
    selected: tuple[UUID, ...]
    mode: str
    devices: Mapping[UUID, DeviceFacts]  # the selected devices
    cohorts: Mapping[CohortKey, tuple[UUID, ...]]  # the cohorts of the selected devices' topologies
    policies: Mapping[str, PolicyFacts]  # by resource class
    progress: Mapping[tuple[UUID, UUID], ProgressFacts]  # (requirement, target) → row
    active_jobs: Mapping[UUID, ActiveJobFacts]  # device → the active job holding it
    profiles: Sequence[ProfileFacts]
    topologies: Mapping[UUID, TopologyFacts]
    workflows: Mapping[UUID, frozenset[str]]  # satellite → advertised workflow names
    #: A target selection (ticked failure rows): device → the only requirements to plan for it; a
    #: device not in it is planned for every requirement.
    only: Mapping[UUID, frozenset[str]] = field(default_factory=dict)
    _profiles_chosen: dict[tuple[str, UUID], ProfileFacts | None] = field(
        default_factory=dict, init=False, repr=False, compare=False
    )

    def wants(self, device_id: UUID, requirement: RequirementFacts) -> bool:
        """Whether the selection asks for this requirement of the device (a target selection
        names only some; anything else is neither planned nor listed as skipped)."""
        names = self.only.get(device_id)
        return names is None or requirement.name in names

    def profile_for(self, resource_class: str, requirement: RequirementFacts) -> ProfileFacts | None:
        """`choose_profile`, once per resource class and requirement (not once per device)."""
        key = (resource_class, requirement.id)
        if key not in self._profiles_chosen:
            self._profiles_chosen[key] = choose_profile(self.profiles, resource_class, requirement)
        return self._profiles_chosen[key]


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
    workflow_name: WorkflowName
    site_id: UUID
    satellite_id: UUID
    resource_class: str
    policy_version: int
    device_ids: tuple[UUID, ...]
    requirements: tuple[PlannedRequirement, ...]
    topology: TopologyFacts | None = None

    @property
    def topology_id(self) -> UUID | None:
        return self.topology.id if self.topology else None

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
    topology: TopologyFacts | None
    resource_class: str
    requirement_name: str
    reason: SkipReason
    device_ids: tuple[UUID, ...]


@dataclass(frozen=True)
class Exclusion:
    device_id: UUID
    reason: ExclusionReason


@dataclass(frozen=True)
class Plan:
    jobs: tuple[PlannedJob, ...]
    skips: tuple[SkipGroup, ...]
    exclusions: tuple[Exclusion, ...]


# --- parameter sources --------------------------------------------------------------------------

_OPERATORS: dict[str, Callable[[Any, Any], bool]] = {
    ConstraintOperator.EQ: operator.eq,
    ConstraintOperator.NE: operator.ne,
    ConstraintOperator.GT: operator.gt,
    ConstraintOperator.GTE: operator.ge,
    ConstraintOperator.LT: operator.lt,
    ConstraintOperator.LTE: operator.le,
    ConstraintOperator.IN: lambda value, bound: value in bound,
}


def satisfies(parameters: Mapping[str, Any], constraints: Mapping[str, Any]) -> bool:
    """Whether a parameter set meets constraints like `{"duration_s": {"gte": 3600}}`; a missing
    parameter, an unknown operator or incomparable values never do."""
    for name, condition in constraints.items():
        if name not in parameters:
            return False
        for op, bound in condition.items():
            compare = _OPERATORS.get(op)
            try:
                ok = compare is not None and bool(compare(parameters[name], bound))
            except TypeError:
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


# --- the reasons --------------------------------------------------------------------------------


def exclusion_of(policy: PolicyFacts | None) -> ExclusionReason | None:
    """Why a device of this policy is left out whole, if it is."""
    if policy is None:
        return ExclusionReason.NO_ACCEPTANCE_POLICY
    if not policy.single_node:
        return ExclusionReason.NO_SINGLE_NODE_REQUIREMENTS
    if not any(r.rerunnable for r in policy.requirements):
        return ExclusionReason.NO_RERUN_REQUIREMENTS
    return None


def _row_reason(
    data: PlanningInput, policy: PolicyFacts, requirement: RequirementFacts, target_id: UUID
) -> SkipReason | None:
    """The projection-based reasons, shared by single-node targets and cohorts."""
    row = data.progress.get((requirement.id, target_id))
    if row is not None and row.policy_version != policy.version:
        return SkipReason.POLICY_CHANGED
    if row is None or not row.decides_latest:
        return SkipReason.PROJECTION_PENDING
    if data.mode == PlanningMode.NON_PASSING and row.verdict == Verdict.PASSED:
        return SkipReason.ALREADY_SATISFIED
    return None


def _advertises(data: PlanningInput, satellite_id: UUID, workflow: WorkflowName) -> bool:
    return workflow in data.workflows.get(satellite_id, frozenset())


def single_node_reason(
    data: PlanningInput, device: DeviceFacts, policy: PolicyFacts, requirement: RequirementFacts
) -> SkipReason | None:
    """The first reason in SINGLE_NODE_CHAIN that applies, or None to dispatch."""
    if not device.eligible:
        return SkipReason.DEVICE_INELIGIBLE
    if not _advertises(data, device.satellite_id, WorkflowName.SINGLE_NODE):
        return SkipReason.WORKFLOW_UNAVAILABLE
    reason = _row_reason(data, policy, requirement, device.id)
    if reason:
        return reason
    holder = data.active_jobs.get(device.id)
    if holder is not None:
        covered = holder.workflow_name == WorkflowName.SINGLE_NODE and requirement.name in holder.requirement_names
        return SkipReason.ALREADY_DISPATCHED if covered else SkipReason.DEVICE_CONTENDED
    if data.profile_for(device.resource_class, requirement) is None:
        return SkipReason.NO_POLICY_SATISFYING_PARAMETER_SOURCE
    return None


def passed_at_version(verdict: str | None, row_version: int | None, policy_version: int) -> bool:
    """A projection row that counts as passed for a cohort: `passed`, at the policy's current
    version. The SQL form (`fleet.burnin.fragments.passed_at_version_sql`) is generated from the
    same constant; the dashboard's "blocked: …" reads it."""
    return verdict == Verdict.PASSED and row_version == policy_version


def single_node_shortfall(
    progress: Mapping[tuple[UUID, UUID], ProgressFacts], policy: PolicyFacts, device_id: UUID
) -> tuple[tuple[str, str], ...]:
    """The single-node requirements a cohort member has not passed at the policy's current
    version, each with the verdict that stands in the way (`not_run` without a row at this
    version): what makes it block its cohort's collective."""
    shortfall = []
    for r in policy.single_node:
        row = progress.get((r.id, device_id))
        if row is not None and passed_at_version(row.verdict, row.policy_version, policy.version):
            continue
        current = row is not None and row.policy_version == policy.version
        shortfall.append((r.name, row.verdict if row is not None and current else Verdict.NOT_RUN))
    return tuple(shortfall)


def passed_single_node(data: PlanningInput, policy: PolicyFacts, device_id: UUID) -> bool:
    """Every single-node requirement of the policy passed at its current version."""
    return not single_node_shortfall(data.progress, policy, device_id)


def cohort_reason(
    data: PlanningInput,
    policy: PolicyFacts,
    requirement: RequirementFacts,
    topology: TopologyFacts,
    members: Sequence[UUID],
    busy: set[UUID],
    selected: set[UUID],
) -> SkipReason | None:
    """Why a cohort cannot run as one collective job now, or None to dispatch it."""
    if not _advertises(data, topology.satellite_id, WorkflowName.MULTI_NODE_COLLECTIVE):
        return SkipReason.WORKFLOW_UNAVAILABLE
    reason = _row_reason(data, policy, requirement, topology.id)
    if reason:
        return reason
    holders = {data.active_jobs[m] for m in members if m in data.active_jobs}
    if any(h.topology_id == topology.id and requirement.name in h.requirement_names for h in holders):
        return SkipReason.ALREADY_DISPATCHED
    if not all(cohort_member_ready(data, policy, m, busy, selected) for m in members):
        return SkipReason.TOPOLOGY_COHORT_BLOCKED
    if data.profile_for(policy.resource_class, requirement) is None:
        return SkipReason.NO_POLICY_SATISFYING_PARAMETER_SOURCE
    return None


def cohort_member_ready(
    data: PlanningInput, policy: PolicyFacts, member: UUID, busy: set[UUID], selected: set[UUID]
) -> bool:
    """A member that does not block its cohort: selected, eligible, free (no active job and none
    planned in this dispatch) and passed every single-node requirement. Only a selected member's
    facts are read: one outside the selection blocks its cohort whatever they say."""
    return (
        member in selected
        and data.devices[member].eligible
        and member not in data.active_jobs
        and member not in busy
        and passed_single_node(data, policy, member)
    )


def cohort_index(devices: Iterable[DeviceFacts]) -> dict[CohortKey, tuple[UUID, ...]]:
    """What a cohort is: (unit, topology, resource class) → every enrolled device of that class in
    the topology, in id order (the loader asks the database the same, through `enrolled_sql`)."""
    cohorts: dict[CohortKey, list[UUID]] = defaultdict(list)
    for device in sorted(devices, key=lambda d: d.id.int):
        if device.enrolled:
            for unit, topology_id in device.topologies.items():
                cohorts[(unit, topology_id, device.resource_class)].append(device.id)
    return {key: tuple(members) for key, members in cohorts.items()}


# --- the passes ---------------------------------------------------------------------------------

_SkipKey = tuple[UUID | None, str, str, SkipReason]


@dataclass
class _Skips:
    """Skipped devices grouped by (topology, resource class, requirement, reason)."""

    groups: dict[_SkipKey, set[UUID]] = field(default_factory=lambda: defaultdict(set))

    def add(self, key: _SkipKey, device_ids: Sequence[UUID] | set[UUID]) -> None:
        self.groups[key].update(device_ids)


@dataclass(frozen=True)
class SingleNodePass:
    jobs: tuple[PlannedJob, ...]
    exclusions: tuple[Exclusion, ...]
    busy: frozenset[UUID]  # devices given a job by this pass


def _planned(requirement: RequirementFacts, profile: ProfileFacts) -> PlannedRequirement:
    return PlannedRequirement(requirement.name, requirement.test, profile.parameters, profile.id, profile.name)


def _selected(data: PlanningInput) -> list[DeviceFacts]:
    return sorted((data.devices[d] for d in dict.fromkeys(data.selected)), key=lambda d: d.id.int)


def plan_single_node(data: PlanningInput, skips: _Skips) -> SingleNodePass:
    """Exclusions, single-node skips, and one single-node job per device with work left."""
    jobs: list[PlannedJob] = []
    exclusions: list[Exclusion] = []
    for device in _selected(data):
        policy = data.policies.get(device.resource_class)
        excluded = exclusion_of(policy)
        if excluded is not None:
            exclusions.append(Exclusion(device.id, excluded))
            continue
        assert policy is not None  # a missing policy is an exclusion
        remaining = []
        for requirement in policy.single_node:
            if not (requirement.rerunnable and data.wants(device.id, requirement)):
                continue
            skip = single_node_reason(data, device, policy, requirement)
            if skip is not None:
                skips.add((None, device.resource_class, requirement.name, skip), [device.id])
                continue
            profile = data.profile_for(device.resource_class, requirement)
            assert profile is not None  # the chain's last reason is "no profile"
            remaining.append(_planned(requirement, profile))
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
    return SingleNodePass(
        jobs=tuple(jobs),
        exclusions=tuple(exclusions),
        busy=frozenset(d for job in jobs for d in job.device_ids),
    )


def plan_cohorts(data: PlanningInput, first: SingleNodePass, skips: _Skips) -> tuple[PlannedJob, ...]:
    """One collective job per rack-acceptance requirement and topology whose cohort is ready."""
    jobs: list[PlannedJob] = []
    busy = set(first.busy)
    excluded = {e.device_id for e in first.exclusions}
    selected = _selected(data)
    selected_ids = {d.id for d in selected}
    planned: set[tuple[UUID, UUID]] = set()
    for device in selected:
        if device.id in excluded:
            continue
        policy = data.policies[device.resource_class]
        for requirement in policy.requirements:
            if not (requirement.multi_node and requirement.rerunnable and requirement.unit):
                continue
            if not data.wants(device.id, requirement):
                continue
            topology_id = device.topologies.get(requirement.unit)
            topology = data.topologies.get(topology_id) if topology_id else None
            if topology is None:
                skips.add(
                    (None, device.resource_class, requirement.name, SkipReason.TOPOLOGY_COHORT_BLOCKED), [device.id]
                )
                continue
            if (requirement.id, topology.id) in planned:
                continue
            planned.add((requirement.id, topology.id))
            members = data.cohorts.get((requirement.unit, topology.id, policy.resource_class), ())
            selected_members = selected_ids.intersection(members)
            reason = cohort_reason(data, policy, requirement, topology, members, busy, selected_ids)
            if reason is not None:
                skips.add((topology.id, policy.resource_class, requirement.name, reason), selected_members)
                continue
            profile = data.profile_for(policy.resource_class, requirement)
            assert profile is not None  # a cohort's last reason is "no profile"
            jobs.append(
                PlannedJob(
                    workflow_name=WorkflowName.MULTI_NODE_COLLECTIVE,
                    site_id=device.site_id,
                    satellite_id=topology.satellite_id,
                    resource_class=policy.resource_class,
                    policy_version=policy.version,
                    device_ids=members,
                    requirements=(_planned(requirement, profile),),
                    topology=topology,
                )
            )
            busy.update(members)
    return tuple(jobs)


def plan(data: PlanningInput) -> Plan:
    skips = _Skips()
    first = plan_single_node(data, skips)
    cohort_jobs = plan_cohorts(data, first, skips)

    def label(topology: TopologyFacts | None) -> str:
        return topology.label if topology else ""

    groups = sorted(
        (
            SkipGroup(
                data.topologies.get(topology_id) if topology_id else None,
                rc,
                name,
                reason,
                tuple(sorted(devices, key=lambda d: d.int)),
            )
            for (topology_id, rc, name, reason), devices in skips.groups.items()
            if devices
        ),
        key=lambda g: (label(g.topology), g.resource_class, g.requirement_name, g.reason),
    )
    jobs = sorted(
        (*first.jobs, *cohort_jobs),
        key=lambda j: (j.workflow_name, label(j.topology), [str(d) for d in j.device_ids]),
    )
    return Plan(jobs=tuple(jobs), skips=tuple(groups), exclusions=first.exclusions)
