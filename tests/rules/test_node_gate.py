"""The node gate's decision (`fleet_rules.node_gate.gate_plan`) over a table of cases: a device's
state × what the scheduler says about its node → the changes, and what is left alone."""

from __future__ import annotations

import pytest

from fleet_rules.node_gate import (
    REASON_MAX,
    GatedDevice,
    NodeView,
    drain_reason,
    gate_plan,
    is_gate_reason,
)
from fleet_rules.vocabulary import DeviceState, NodeGateAction, NodeGateSkip

S = DeviceState
A = NodeGateAction
K = NodeGateSkip
OURS = "fleet-burnin: needs repair: gpu-diag failed 3 times"
THEIRS = "ops: bad fan, ticket 4411"
RETIRED = "fleet-burnin: decommissioned"

IDLE = NodeView("n1")
DRAINED_OURS = NodeView("n1", drained=True, reason=OURS)
DRAINED_THEIRS = NodeView("n1", drained=True, reason=THEIRS)
DOWN_THEIRS = NodeView("n1", down=True, reason="Not responding")
RESERVED_ELSEWHERE = NodeView("n1", reserved=True)
DRAINED_OURS_ELSEWHERE = NodeView("n1", drained=True, reason=OURS, reserved=True)


# (case, state, node view, in fleet-burnin's reservation, expected changes, expected skips)
CASES = [
    # needs_repair: drained with the reason, and held
    ("repair, idle", S.NEEDS_REPAIR, IDLE, False, [(A.DRAIN, OURS), (A.HOLD, "")], []),
    ("repair, already drained by us, held", S.NEEDS_REPAIR, DRAINED_OURS, True, [], []),
    ("repair, drained by us, not held", S.NEEDS_REPAIR, DRAINED_OURS, False, [(A.HOLD, "")], []),
    (
        "repair, our drain with an old why",
        S.NEEDS_REPAIR,
        NodeView("n1", drained=True, reason="fleet-burnin: needs repair: older"),
        True,
        [(A.DRAIN, OURS)],
        [],
    ),
    ("repair, drained by someone else", S.NEEDS_REPAIR, DRAINED_THEIRS, True, [], [K.FOREIGN_REASON]),
    ("repair, down: not responding", S.NEEDS_REPAIR, DOWN_THEIRS, True, [], [K.FOREIGN_REASON]),
    ("repair, in another reservation", S.NEEDS_REPAIR, RESERVED_ELSEWHERE, False, [(A.DRAIN, OURS)], [
        K.FOREIGN_RESERVATION
    ]),
    ("decommissioned, idle", S.DECOMMISSIONED, IDLE, False, [(A.DRAIN, RETIRED), (A.HOLD, "")], []),
    # staged, burn_in, accepted, maintenance: held, never drained by the gate
    ("staged, idle", S.STAGED, IDLE, False, [(A.HOLD, "")], []),
    ("burn_in, held already", S.BURN_IN, IDLE, True, [], []),
    ("accepted, idle", S.ACCEPTED, IDLE, False, [(A.HOLD, "")], []),
    ("maintenance, idle", S.MAINTENANCE, IDLE, False, [(A.HOLD, "")], []),
    ("burn_in after a repair: our drain lifted, held", S.BURN_IN, DRAINED_OURS, True, [(A.RESUME, "")], []),
    ("burn_in after a repair, not yet held", S.BURN_IN, DRAINED_OURS, False, [(A.HOLD, ""), (A.RESUME, "")], []),
    ("burn_in, drained by someone else", S.BURN_IN, DRAINED_THEIRS, True, [], [K.FOREIGN_REASON]),
    ("staged, in another reservation", S.STAGED, RESERVED_ELSEWHERE, False, [], [K.FOREIGN_RESERVATION]),
    (
        "burn_in, our drain, in another reservation: stays drained",
        S.BURN_IN,
        DRAINED_OURS_ELSEWHERE,
        False,
        [],
        [K.FOREIGN_RESERVATION],
    ),
    # in_service: released and resumed, if it is ours
    ("in service, idle", S.IN_SERVICE, IDLE, False, [], []),
    ("in service, held", S.IN_SERVICE, IDLE, True, [(A.RELEASE, "")], []),
    ("in service, our drain", S.IN_SERVICE, DRAINED_OURS, False, [(A.RESUME, "")], []),
    ("in service, our drain and held", S.IN_SERVICE, DRAINED_OURS, True, [(A.RELEASE, ""), (A.RESUME, "")], []),
    ("in service, drained by someone else", S.IN_SERVICE, DRAINED_THEIRS, False, [], [K.FOREIGN_REASON]),
    ("in service, drained by someone else, held", S.IN_SERVICE, DRAINED_THEIRS, True, [(A.RELEASE, "")], [
        K.FOREIGN_REASON
    ]),
    ("in service, in another reservation", S.IN_SERVICE, RESERVED_ELSEWHERE, False, [], []),
]  # fmt: skip


@pytest.mark.parametrize(
    ("state", "view", "held", "changes", "skips"),
    [case[1:] for case in CASES],
    ids=[case[0] for case in CASES],
)
def test_a_device_state_and_its_node_give_these_changes(
    state: DeviceState, view: NodeView, held: bool, changes: list[tuple[A, str]], skips: list[K]
) -> None:
    # the service says why only for needs_repair
    device = GatedDevice("a01-n01", "n1", state, "gpu-diag failed 3 times" if state == S.NEEDS_REPAIR else "")

    plan = gate_plan([device], {"n1": view}, ["n1"] if held else [])

    assert [(c.action, c.reason) for c in plan.changes] == changes
    assert [s.skip for s in plan.skipped] == skips
    expect_held = (held or any(a == A.HOLD for a, _ in changes)) and not any(a == A.RELEASE for a, _ in changes)
    assert plan.reservation == (("n1",) if expect_held else ())


def test_a_plan_applied_is_a_fixed_point_nothing_is_left_to_change() -> None:
    devices = [
        GatedDevice("h1", "n1", S.NEEDS_REPAIR, "gpu-diag failed 3 times"),
        GatedDevice("h2", "n2", S.BURN_IN),
        GatedDevice("h3", "n3", S.IN_SERVICE),
        GatedDevice("h4", "n4", S.ACCEPTED),
    ]
    nodes = {
        "n1": NodeView("n1"),
        "n2": NodeView("n2", drained=True, reason="fleet-burnin: needs repair: old"),
        "n3": NodeView("n3", drained=True, reason="fleet-burnin: accepted"),
        "n4": NodeView("n4"),
    }
    plan = gate_plan(devices, nodes, ["n3"])
    assert [c.describe() for c in plan.changes] == [
        'drain n1 (h1: needs_repair) reason="fleet-burnin: needs repair: gpu-diag failed 3 times"',
        "hold n1 (h1: needs_repair)",
        "hold n2 (h2: burn_in)",
        "release n3 (h3: in_service)",
        "hold n4 (h4: accepted)",
        "resume n2 (h2: burn_in)",
        "resume n3 (h3: in_service)",
    ]

    # What the scheduler says once the plan is applied: a second sweep changes nothing.
    after = {
        "n1": NodeView("n1", drained=True, reason=plan.of(A.DRAIN)[0].reason, reserved=True),
        "n2": NodeView("n2", reserved=True),
        "n3": NodeView("n3"),
        "n4": NodeView("n4", reserved=True),
    }
    again = gate_plan(devices, after, plan.reservation)
    assert again.changes == () and again.skipped == ()
    assert again.reservation == plan.reservation == ("n1", "n2", "n4")


def test_nodes_of_the_reservation_that_no_device_names_stay_in_it() -> None:
    plan = gate_plan([GatedDevice("h1", "n1", S.IN_SERVICE)], {"n1": NodeView("n1")}, ["n1", "n9"])
    assert plan.reservation == ("n9",)
    assert [c.action for c in plan.changes] == [A.RELEASE]


def test_a_device_whose_node_slurm_does_not_know_is_reported_not_touched() -> None:
    plan = gate_plan([GatedDevice("h1", "gpu-x", S.NEEDS_REPAIR, "why")], {"n1": NodeView("n1")}, [])
    assert plan.changes == ()
    assert [(s.skip, s.node) for s in plan.skipped] == [(K.NOT_IN_SLURM, "gpu-x")]


def test_two_devices_mapped_to_one_node_give_it_the_stricter_state() -> None:
    devices = [GatedDevice("h1", "n1", S.IN_SERVICE), GatedDevice("h2", "n1", S.NEEDS_REPAIR, "xid 79")]
    plan = gate_plan(devices, {"n1": NodeView("n1")}, [])
    assert [(c.action, c.hostname) for c in plan.changes] == [(A.DRAIN, "h2"), (A.HOLD, "h2")]


@pytest.mark.parametrize(
    ("why", "expected"),
    [
        ("", "fleet-burnin: needs repair"),
        ("gpu-diag failed 3 times", "fleet-burnin: needs repair: gpu-diag failed 3 times"),
        ('Xid 79 "fallen\noff" [the bus] `rm -rf`\\', "fleet-burnin: needs repair: Xid 79 fallen off the bus rm -rf"),
        ("GPU 3 \u2192 s\u00e9rie", "fleet-burnin: needs repair: GPU 3 s rie"),
    ],
)
def test_a_drain_reason_is_prefixed_printable_and_quote_free(why: str, expected: str) -> None:
    assert drain_reason(S.NEEDS_REPAIR, why) == expected
    assert is_gate_reason(expected)


def test_a_long_why_is_cut_to_the_bound() -> None:
    reason = drain_reason(S.NEEDS_REPAIR, "x" * 500)
    assert len(reason) == REASON_MAX and reason.endswith("...") and is_gate_reason(reason)


@pytest.mark.parametrize("reason", ["", "Not responding", "ops: fleet-burnin: later", "fleet-burnin"])
def test_only_reasons_that_start_with_the_prefix_are_the_gates(reason: str) -> None:
    assert not is_gate_reason(reason)


# --- the remediation ladder's reboot keeps the gate's ownership rules (docs/remediation.md) ---------------


def test_a_reboot_is_refused_on_a_node_someone_else_drained_or_downed():
    from fleet_rules.node_gate import NodeView, reboot_refusal

    assert reboot_refusal(NodeView("n1")) is None
    assert reboot_refusal(NodeView("n1", drained=True, reason="fleet-burnin: needs repair")) is None
    assert reboot_refusal(NodeView("n1", drained=True, reason="bob: swapping PSU")) == (
        "the node is drained by someone else (bob: swapping PSU): not rebooted"
    )
    assert "down by someone else (Not responding)" in (
        reboot_refusal(NodeView("n1", down=True, reason="Not responding")) or ""
    )
    assert reboot_refusal(None) == "the scheduler does not know the node"
