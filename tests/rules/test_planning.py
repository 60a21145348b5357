"""Rerun planning (`fleet_rules.planning`) by table, without a database: every exclusion, every skip
reason, each adjacent pair of the single-node precedence chain, each way a cohort is blocked, and
the two passes put together.

A scenario starts from a device that would be dispatched (eligible, its satellite advertises both
workflows, its projection row is current and failed, no job holds it, a parameter profile fits)
and applies *conditions*, each of which alone makes exactly one reason apply.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from uuid import UUID, uuid4

import pytest

from fleet_rules.planning import (
    SINGLE_NODE_CHAIN,
    ActiveJobFacts,
    DeviceFacts,
    PlanningInput,
    PolicyFacts,
    ProfileFacts,
    ProgressFacts,
    RequirementFacts,
    TopologyFacts,
    choose_profile,
    cohort_index,
    cohort_reason,
    exclusion_of,
    plan,
    satisfies,
    single_node_reason,
)
from fleet_rules.vocabulary import (
    RACK_ACCEPTANCE,
    DeviceState,
    ExclusionReason,
    PlanningMode,
    RequirementScope,
    SkipReason,
    TopologyUnit,
    Verdict,
    WorkflowName,
)

RC = "gpu.h200.8x"
SITE, SAT = uuid4(), uuid4()
T0 = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)
BOTH_WORKFLOWS = frozenset({WorkflowName.SINGLE_NODE, WorkflowName.MULTI_NODE_COLLECTIVE})


def requirement(name: str = "gpu-diag", **overrides) -> RequirementFacts:
    base = RequirementFacts(uuid4(), name, "burn-in", RequirementScope.SINGLE_NODE, None, "dcgm-diag", True, {})
    return replace(base, **overrides)


def rack_requirement(name: str = "rack-nccl", **overrides) -> RequirementFacts:
    return requirement(
        name, gate=RACK_ACCEPTANCE, scope=RequirementScope.MULTI_NODE, unit=TopologyUnit.RACK, test="nccl", **overrides
    )


def device(hostname: str = "n1", **overrides) -> DeviceFacts:
    base = DeviceFacts(uuid4(), hostname, SITE, SAT, RC, DeviceState.BURN_IN, T0, {})
    return replace(base, **overrides)


def profile(test: str = "dcgm-diag", **parameters) -> ProfileFacts:
    return ProfileFacts(uuid4(), RC, test, "default", parameters or {"level": 3}, T0)


@dataclass
class Scenario:
    """Mutable facts, turned into a `PlanningInput` at the end."""

    requirements: list[RequirementFacts]
    devices: list[DeviceFacts]
    selected: list[UUID] | None = None
    mode: str = PlanningMode.NON_PASSING
    version: int = 3
    progress: dict[tuple[UUID, UUID], ProgressFacts] = field(default_factory=dict)
    active_jobs: dict[UUID, ActiveJobFacts] = field(default_factory=dict)
    profiles: list[ProfileFacts] = field(default_factory=lambda: [profile(), profile("nccl")])
    topologies: dict[UUID, TopologyFacts] = field(default_factory=dict)
    workflows: dict[UUID, frozenset[str]] = field(default_factory=lambda: {SAT: BOTH_WORKFLOWS})
    has_policy: bool = True
    only: dict[UUID, frozenset[str]] = field(default_factory=dict)

    def row(self, requirement: RequirementFacts, target: UUID, verdict: str = Verdict.FAILED) -> None:
        """A current projection row: this policy version, deciding the target's latest execution."""
        self.progress[(requirement.id, target)] = ProgressFacts(verdict, self.version, decides_latest=True)

    def newer_execution(self, requirement: RequirementFacts, target: UUID) -> None:
        """An execution newer than the one the row decided, not reconciled yet."""
        row = self.progress[(requirement.id, target)]
        self.progress[(requirement.id, target)] = replace(row, decides_latest=False)

    def policy(self) -> PolicyFacts:
        return PolicyFacts(RC, self.version, tuple(self.requirements))

    def input(self) -> PlanningInput:
        """What the loader reads: the selected devices' facts, every device only as a cohort member."""
        selected = tuple(self.selected if self.selected is not None else [d.id for d in self.devices])
        return PlanningInput(
            selected=selected,
            mode=self.mode,
            devices={d.id: d for d in self.devices if d.id in selected},
            cohorts=cohort_index(self.devices),
            policies={RC: self.policy()} if self.has_policy else {},
            progress=self.progress,
            active_jobs=self.active_jobs,
            profiles=self.profiles,
            topologies=self.topologies,
            workflows=self.workflows,
            only=self.only,
        )


def single_node_scenario() -> tuple[Scenario, DeviceFacts, RequirementFacts]:
    diag = requirement()
    node = device()
    scenario = Scenario(requirements=[diag], devices=[node])
    scenario.row(diag, node.id)
    return scenario, node, diag


# --- the single-node chain ---------------------------------------------------------------------


def _ineligible(s: Scenario, d: DeviceFacts, r: RequirementFacts) -> None:
    s.devices[0] = replace(d, state=DeviceState.ACCEPTED)


def _workflow_missing(s: Scenario, d: DeviceFacts, r: RequirementFacts) -> None:
    s.workflows = {SAT: frozenset({WorkflowName.MULTI_NODE_COLLECTIVE})}


def _policy_changed(s: Scenario, d: DeviceFacts, r: RequirementFacts) -> None:
    row = s.progress[(r.id, d.id)]
    s.progress[(r.id, d.id)] = replace(row, policy_version=s.version - 1)


def _pending(s: Scenario, d: DeviceFacts, r: RequirementFacts) -> None:
    s.newer_execution(r, d.id)


def _satisfied(s: Scenario, d: DeviceFacts, r: RequirementFacts) -> None:
    row = s.progress[(r.id, d.id)]
    s.progress[(r.id, d.id)] = replace(row, verdict=Verdict.PASSED)


def _dispatched(s: Scenario, d: DeviceFacts, r: RequirementFacts) -> None:
    s.active_jobs[d.id] = ActiveJobFacts(uuid4(), WorkflowName.SINGLE_NODE, frozenset({r.name}))


def _contended(s: Scenario, d: DeviceFacts, r: RequirementFacts) -> None:
    s.active_jobs[d.id] = ActiveJobFacts(uuid4(), WorkflowName.SINGLE_NODE, frozenset({"another-requirement"}))


def _no_profile(s: Scenario, d: DeviceFacts, r: RequirementFacts) -> None:
    s.profiles = [p for p in s.profiles if p.test != r.test]


CONDITIONS = {
    SkipReason.DEVICE_INELIGIBLE: _ineligible,
    SkipReason.WORKFLOW_UNAVAILABLE: _workflow_missing,
    SkipReason.POLICY_CHANGED: _policy_changed,
    SkipReason.PROJECTION_PENDING: _pending,
    SkipReason.ALREADY_SATISFIED: _satisfied,
    SkipReason.ALREADY_DISPATCHED: _dispatched,
    SkipReason.DEVICE_CONTENDED: _contended,
    SkipReason.NO_POLICY_SATISFYING_PARAMETER_SOURCE: _no_profile,
}


def reason_under(*reasons: SkipReason) -> SkipReason | None:
    scenario, node, diag = single_node_scenario()
    for reason in reasons:
        CONDITIONS[reason](scenario, node, diag)
    data = scenario.input()
    return single_node_reason(data, data.devices[node.id], scenario.policy(), diag)


def test_a_device_with_no_reason_against_it_is_dispatched():
    assert reason_under() is None


@pytest.mark.parametrize("reason", SINGLE_NODE_CHAIN)
def test_each_reason_alone_is_the_reason(reason):
    assert reason_under(reason) == reason


# The two outcomes of one fact — whether the job that holds the device covers this requirement —
# cannot both hold, so that pair of the chain is checked by `test_a_holder_...` below instead.
EXCLUSIVE = {(SkipReason.ALREADY_DISPATCHED, SkipReason.DEVICE_CONTENDED)}
ADJACENT = [pair for pair in zip(SINGLE_NODE_CHAIN, SINGLE_NODE_CHAIN[1:], strict=False) if pair not in EXCLUSIVE]


@pytest.mark.parametrize(("earlier", "later"), ADJACENT, ids=[f"{a}>{b}" for a, b in ADJACENT])
def test_of_two_adjacent_reasons_the_earlier_wins(earlier, later):
    assert reason_under(later, earlier) == earlier
    assert reason_under(earlier, later) == earlier


def test_a_holder_covering_the_requirement_is_already_dispatched_and_any_other_holder_contends():
    assert reason_under(SkipReason.ALREADY_DISPATCHED) == SkipReason.ALREADY_DISPATCHED
    assert reason_under(SkipReason.DEVICE_CONTENDED) == SkipReason.DEVICE_CONTENDED
    assert reason_under(SkipReason.DEVICE_CONTENDED, SkipReason.NO_POLICY_SATISFYING_PARAMETER_SOURCE) == (
        SkipReason.DEVICE_CONTENDED
    )


def test_the_chain_holds_every_single_node_reason_once():
    assert len(set(SINGLE_NODE_CHAIN)) == len(SINGLE_NODE_CHAIN)
    assert set(SINGLE_NODE_CHAIN) == set(SkipReason) - {SkipReason.TOPOLOGY_COHORT_BLOCKED}


def test_a_missing_projection_row_is_pending():
    scenario, node, diag = single_node_scenario()
    scenario.progress.clear()
    data = scenario.input()
    assert single_node_reason(data, data.devices[node.id], scenario.policy(), diag) == SkipReason.PROJECTION_PENDING


def test_mode_all_reruns_a_passed_requirement():
    scenario, node, diag = single_node_scenario()
    _satisfied(scenario, node, diag)
    scenario.mode = PlanningMode.ALL
    data = scenario.input()
    assert single_node_reason(data, data.devices[node.id], scenario.policy(), diag) is None


@pytest.mark.parametrize(
    ("state", "enrolled", "reason"),
    [
        (state, True, None if state in {"staged", "burn_in", "maintenance"} else "device_ineligible")
        for state in DeviceState
    ]
    + [(DeviceState.BURN_IN, False, SkipReason.DEVICE_INELIGIBLE)],
)
def test_eligibility_per_lifecycle_state(state, enrolled, reason):
    scenario, node, diag = single_node_scenario()
    scenario.devices[0] = replace(node, state=state, enrolled_at=T0 if enrolled else None)
    data = scenario.input()
    assert single_node_reason(data, data.devices[node.id], scenario.policy(), diag) == reason


# --- exclusions ---------------------------------------------------------------------------------

EXCLUSIONS = {
    ExclusionReason.NO_ACCEPTANCE_POLICY: None,
    ExclusionReason.NO_SINGLE_NODE_REQUIREMENTS: PolicyFacts(RC, 1, (rack_requirement(),)),
    ExclusionReason.NO_RERUN_REQUIREMENTS: PolicyFacts(
        RC, 1, (requirement(rerunnable=False), rack_requirement(rerunnable=False))
    ),
}


@pytest.mark.parametrize("reason", list(ExclusionReason))
def test_each_exclusion(reason):
    assert exclusion_of(EXCLUSIONS[reason]) == reason


def test_a_policy_with_a_rerunnable_requirement_excludes_nothing():
    assert exclusion_of(PolicyFacts(RC, 1, (requirement(rerunnable=False), rack_requirement()))) is None


def test_an_excluded_device_is_reported_once_and_planned_for_nothing():
    scenario, node, _ = single_node_scenario()
    scenario.has_policy = False
    result = plan(scenario.input())
    assert [(e.device_id, e.reason) for e in result.exclusions] == [(node.id, ExclusionReason.NO_ACCEPTANCE_POLICY)]
    assert result.jobs == () and result.skips == ()


# --- cohorts -------------------------------------------------------------------------------------


def cohort_scenario(size: int = 3) -> tuple[Scenario, TopologyFacts, RequirementFacts, list[DeviceFacts]]:
    """A rack whose members all passed the single-node requirement and are all selected: its
    collective is dispatched."""
    diag, nccl = requirement(), rack_requirement()
    rack = TopologyFacts(uuid4(), TopologyUnit.RACK, "rack-a01", SAT)
    members = [device(f"a01-n0{i}", topologies={TopologyUnit.RACK: rack.id}) for i in range(1, size + 1)]
    scenario = Scenario(requirements=[diag, nccl], devices=members, topologies={rack.id: rack})
    for member in members:
        scenario.row(diag, member.id, Verdict.PASSED)
    scenario.row(nccl, rack.id, Verdict.FAILED)
    return scenario, rack, nccl, members


def cohort_reason_of(scenario: Scenario, rack: TopologyFacts, nccl: RequirementFacts, busy=()) -> SkipReason | None:
    data = scenario.input()
    members = data.cohorts.get((TopologyUnit.RACK, rack.id, RC), ())
    return cohort_reason(data, scenario.policy(), nccl, rack, members, set(busy), set(data.selected))


def test_a_ready_cohort_is_dispatched_as_one_collective_job():
    scenario, rack, nccl, members = cohort_scenario()
    assert cohort_reason_of(scenario, rack, nccl) is None
    result = plan(scenario.input())
    assert [(j.workflow_name, j.topology, set(j.device_ids)) for j in result.jobs] == [
        (WorkflowName.MULTI_NODE_COLLECTIVE, rack, {m.id for m in members})
    ]
    assert [(g.requirement_name, g.reason) for g in result.skips] == [("gpu-diag", SkipReason.ALREADY_SATISFIED)]


def _member_not_selected(s, members):
    s.selected = [m.id for m in members[1:]]


def _member_ineligible(s, members):
    s.devices[0] = replace(members[0], state=DeviceState.IN_SERVICE)


def _member_held(s, members):
    s.active_jobs[members[0].id] = ActiveJobFacts(uuid4(), WorkflowName.SINGLE_NODE, frozenset({"other"}))


def _member_not_passed(s, members):
    diag = s.requirements[0]
    s.row(diag, members[0].id, Verdict.FAILED)


def _member_passed_under_an_older_version(s, members):
    diag = s.requirements[0]
    row = s.progress[(diag.id, members[0].id)]
    s.progress[(diag.id, members[0].id)] = replace(row, policy_version=s.version - 1)


COHORT_BLOCKERS = {
    "a member is not selected": _member_not_selected,
    "a member is ineligible": _member_ineligible,
    "a member is held by another job": _member_held,
    "a member has not passed a single-node requirement": _member_not_passed,
    "a member passed only under an older policy version": _member_passed_under_an_older_version,
}


@pytest.mark.parametrize("blocker", list(COHORT_BLOCKERS), ids=list(COHORT_BLOCKERS))
def test_each_way_a_cohort_is_blocked(blocker):
    scenario, rack, nccl, members = cohort_scenario()
    COHORT_BLOCKERS[blocker](scenario, members)
    assert cohort_reason_of(scenario, rack, nccl) == SkipReason.TOPOLOGY_COHORT_BLOCKED


def test_a_member_given_a_job_in_the_same_dispatch_blocks_its_cohort():
    scenario, rack, nccl, members = cohort_scenario()
    assert cohort_reason_of(scenario, rack, nccl, busy=[members[1].id]) == SkipReason.TOPOLOGY_COHORT_BLOCKED
    # ...which the plan does by itself when a member still has single-node work:
    _member_not_passed(scenario, members)
    result = plan(scenario.input())
    assert [j.workflow_name for j in result.jobs] == [WorkflowName.SINGLE_NODE]
    blocked = [g for g in result.skips if g.reason == SkipReason.TOPOLOGY_COHORT_BLOCKED]
    assert [(g.topology, set(g.device_ids)) for g in blocked] == [(rack, {m.id for m in members})]


def test_a_device_outside_any_topology_of_the_unit_is_blocked_alone():
    diag, nccl = requirement(), rack_requirement()
    loner = device("loner")
    scenario = Scenario(requirements=[diag, nccl], devices=[loner])
    scenario.row(diag, loner.id, Verdict.PASSED)
    result = plan(scenario.input())
    assert [(g.topology, g.requirement_name, g.reason, g.device_ids) for g in result.skips] == [
        (None, "gpu-diag", SkipReason.ALREADY_SATISFIED, (loner.id,)),
        (None, "rack-nccl", SkipReason.TOPOLOGY_COHORT_BLOCKED, (loner.id,)),
    ]


COHORT_REASONS = {
    SkipReason.WORKFLOW_UNAVAILABLE: lambda s, rack, nccl: s.workflows.update(
        {SAT: frozenset({WorkflowName.SINGLE_NODE})}
    ),
    SkipReason.POLICY_CHANGED: lambda s, rack, nccl: s.progress.update(
        {(nccl.id, rack.id): replace(s.progress[(nccl.id, rack.id)], policy_version=s.version - 1)}
    ),
    SkipReason.PROJECTION_PENDING: lambda s, rack, nccl: s.newer_execution(nccl, rack.id),
    SkipReason.ALREADY_SATISFIED: lambda s, rack, nccl: s.row(nccl, rack.id, Verdict.PASSED),
    SkipReason.ALREADY_DISPATCHED: lambda s, rack, nccl: s.active_jobs.update(
        {
            d.id: ActiveJobFacts(uuid4(), WorkflowName.MULTI_NODE_COLLECTIVE, frozenset({nccl.name}), rack.id)
            for d in s.devices
        }
    ),
    SkipReason.NO_POLICY_SATISFYING_PARAMETER_SOURCE: lambda s, rack, nccl: s.profiles.clear(),
}


@pytest.mark.parametrize("reason", list(COHORT_REASONS))
def test_each_reason_a_whole_cohort_is_skipped_for(reason):
    scenario, rack, nccl, _ = cohort_scenario()
    COHORT_REASONS[reason](scenario, rack, nccl)
    assert cohort_reason_of(scenario, rack, nccl) == reason


def test_every_skip_reason_is_reachable_by_some_table():
    assert set(CONDITIONS) | set(COHORT_REASONS) | {SkipReason.TOPOLOGY_COHORT_BLOCKED} == set(SkipReason)


# --- the passes together -------------------------------------------------------------------------


def test_one_single_node_job_per_device_carries_all_its_remaining_requirements():
    diag, mem = requirement("gpu-diag"), requirement("hbm-bw", test="nvbandwidth")
    nodes = [device("n1"), device("n2")]
    scenario = Scenario(requirements=[diag, mem], devices=nodes)
    scenario.profiles.append(profile("nvbandwidth"))
    for node in nodes:
        scenario.row(diag, node.id)
        scenario.row(mem, node.id)
    scenario.row(mem, nodes[1].id, Verdict.PASSED)
    result = plan(scenario.input())
    by_device = {j.device_ids: [r.name for r in j.requirements] for j in result.jobs}
    assert by_device == {(nodes[0].id,): ["gpu-diag", "hbm-bw"], (nodes[1].id,): ["gpu-diag"]}
    assert all(j.workflow_name == WorkflowName.SINGLE_NODE for j in result.jobs)


def test_a_target_selection_plans_only_its_requirements_and_lists_nothing_else_as_skipped():
    """Issue 27, finding 6: a ticked failures row is one (device, requirement) target; the device's
    other failing requirements are neither planned nor reported as skipped."""
    diag, mem = requirement("gpu-diag"), requirement("hbm-bw", test="nvbandwidth")
    nodes = [device("n1"), device("n2")]
    scenario = Scenario(requirements=[diag, mem], devices=nodes)
    scenario.profiles.append(profile("nvbandwidth"))
    for node in nodes:
        scenario.row(diag, node.id)
        scenario.row(mem, node.id)
    scenario.row(diag, nodes[0].id, Verdict.PASSED)
    scenario.only = {nodes[0].id: frozenset({"hbm-bw"}), nodes[1].id: frozenset({"hbm-bw"})}
    result = plan(scenario.input())
    assert {j.device_ids: [r.name for r in j.requirements] for j in result.jobs} == {
        (nodes[0].id,): ["hbm-bw"],
        (nodes[1].id,): ["hbm-bw"],
    }
    assert result.skips == ()  # n1's passed gpu-diag is not "already satisfied": nobody asked for it


def test_a_device_not_named_by_a_target_keeps_every_requirement():
    diag, mem = requirement("gpu-diag"), requirement("hbm-bw", test="nvbandwidth")
    nodes = [device("n1"), device("n2")]
    scenario = Scenario(requirements=[diag, mem], devices=nodes)
    scenario.profiles.append(profile("nvbandwidth"))
    for node in nodes:
        scenario.row(diag, node.id)
        scenario.row(mem, node.id)
    scenario.only = {nodes[0].id: frozenset({"gpu-diag"})}
    result = plan(scenario.input())
    assert {j.device_ids: [r.name for r in j.requirements] for j in result.jobs} == {
        (nodes[0].id,): ["gpu-diag"],
        (nodes[1].id,): ["gpu-diag", "hbm-bw"],
    }


def test_a_target_selection_of_a_racks_collective_plans_the_collective_alone():
    scenario, rack, nccl, members = cohort_scenario()
    scenario.only = {m.id: frozenset({nccl.name}) for m in members}
    result = plan(scenario.input())
    assert [(j.workflow_name, [r.name for r in j.requirements]) for j in result.jobs] == [
        (WorkflowName.MULTI_NODE_COLLECTIVE, [nccl.name])
    ]
    assert result.skips == ()  # the members' passed gpu-diag is not listed: it was not selected
    scenario.only = {m.id: frozenset({"gpu-diag"}) for m in members}
    assert plan(scenario.input()).jobs == ()


def test_a_plan_is_the_same_whatever_order_the_devices_are_selected_in():
    scenario, _, _, members = cohort_scenario(4)
    _member_not_passed(scenario, members)
    first = plan(scenario.input())
    scenario.selected = [m.id for m in reversed(members)]
    assert plan(scenario.input()) == first


def test_the_newest_profile_that_meets_the_constraints_is_chosen():
    strict = requirement(parameter_constraints={"duration_s": {"gte": 3600}})
    short = replace(profile(duration_s=600), created_at=datetime(2026, 12, 2, tzinfo=UTC))
    long = profile(duration_s=7200)
    assert choose_profile([short, long], RC, strict) == long
    assert choose_profile([short], RC, strict) is None


@pytest.mark.parametrize(
    ("parameters", "constraints", "ok"),
    [
        ({"d": 5}, {"d": {"gte": 5}}, True),
        ({"d": 4}, {"d": {"gte": 5}}, False),
        ({"d": 5}, {"d": {"gt": 5}}, False),
        ({"d": 5}, {"d": {"lt": 6, "ne": 4}}, True),
        ({"d": 5}, {"d": {"eq": 5}}, True),
        ({"d": "x"}, {"d": {"in": ["x", "y"]}}, True),
        ({"d": "x"}, {"d": {"gte": 5}}, False),  # incomparable: never satisfied
        ({}, {"d": {"eq": 5}}, False),  # missing: never satisfied
        ({"d": 5}, {"d": {"about": 5}}, False),  # unknown operator: never satisfied
    ],
)
def test_parameter_constraints(parameters, constraints, ok):
    assert satisfies(parameters, constraints) is ok
