"""The autopilot's decisions, without a database: a table of situations, then properties that
hold for any site (the blast radius is never exceeded, an ineligible device is never touched)."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any
from uuid import UUID, uuid4

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fleet_rules.autopilot import (
    CollectiveFacts,
    DeviceFacts,
    PlanFacts,
    Settings,
    SiteFacts,
    backoff_for,
    decide,
)
from fleet_rules.blast_radius import Placed, Radius, Unit, admit, rack_allowance
from fleet_rules.vocabulary import AutopilotActionKind as K
from fleet_rules.vocabulary import DeviceState, Verdict

NOW = datetime(2026, 1, 1, 12, tzinfo=UTC)
ON = Settings(enabled=True, max_under_test=100, backoff=timedelta(minutes=10))


def device(name: str = "n01", **kw) -> DeviceFacts:
    base = {
        "device_id": uuid4(),
        "hostname": name,
        "resource_class": "gpu",
        "state": DeviceState.BURN_IN,
        "enrolled": True,
        "rack": "a01",
        "rack_size": 8,
    }
    return DeviceFacts(**(base | kw))  # type: ignore[arg-type]


def site(*devices: DeviceFacts, settings: Settings = ON, **kw) -> SiteFacts:
    return SiteFacts(site_id=uuid4(), slug="lon-1", now=NOW, settings=settings, devices=devices, **kw)


def kinds(facts: SiteFacts) -> list[K]:
    return [a.kind for a in decide(facts)]


failed_once: dict[str, Any] = {
    "failing": Verdict.FAILED,
    "attempts": 1,
    "last_finished_at": NOW - timedelta(minutes=11),
}


@pytest.mark.parametrize(
    ("case", "facts", "expected"),
    [
        ("pending", site(device(not_run=3)), [K.DISPATCH]),
        ("failed once, backoff over", site(device(**failed_once)), [K.RERUN]),
        ("failed once, within backoff", site(device(**failed_once | {"last_finished_at": NOW})), []),
        (
            "errored: retried sooner than failed",
            site(device(failing=Verdict.ERRORED, attempts=1, last_finished_at=NOW - timedelta(minutes=3))),
            [K.RERUN],
        ),
        ("at the repair limit", site(device(**failed_once | {"attempts": 3, "repair_after_failures": 3})), []),
        ("in needs_repair", site(device(state=DeviceState.NEEDS_REPAIR, **failed_once)), []),
        ("breaker open", site(device(not_run=1), open_breakers=frozenset({"gpu"})), []),
        ("paused", site(device(not_run=1), paused=True), []),
        ("disabled", site(device(not_run=1), settings=Settings(enabled=False)), []),
        ("operator job running", site(device(not_run=1, under_test=True)), []),
        ("not enrolled", site(device(not_run=1, enrolled=False)), []),
        (
            "certificate near expiry, not in service",
            site(device(state=DeviceState.ACCEPTED, certificate_valid_until=NOW + timedelta(days=2))),
            [K.RENEW],
        ),
        (
            "certificate near expiry, in service",
            site(device(state=DeviceState.IN_SERVICE, certificate_valid_until=NOW + timedelta(days=2))),
            [],
        ),
        (
            "certificate far from expiry",
            site(device(state=DeviceState.ACCEPTED, certificate_valid_until=NOW + timedelta(days=30))),
            [],
        ),
        (
            "limit reached",
            site(
                device("n01", not_run=1, under_test=True),
                device("n02", not_run=1),
                settings=replace(ON, max_under_test=1),
            ),
            [],
        ),
    ],
    ids=lambda v: v if isinstance(v, str) else "",
)
def test_a_site_in_each_situation_gets_the_actions_it_calls_for(case, facts, expected):
    assert kinds(facts) == expected, case


def rack(n: int = 4, **kw) -> list[DeviceFacts]:
    return [device(f"n{i:02}", rack_size=n, **kw) for i in range(n)]


def collective(members: list[DeviceFacts], **kw) -> CollectiveFacts:
    base = {
        "topology_id": uuid4(),
        "label": "rack-a01",
        "requirement_name": "rack-nccl",
        "verdict": Verdict.FAILED,
        "member_ids": tuple(m.device_id for m in members),
        "attempts": 2,
        "finished_at": NOW - timedelta(hours=1),
    }
    return CollectiveFacts(**(base | kw))  # type: ignore[arg-type]


def test_a_collective_failing_while_its_members_pass_alone_is_isolated_not_rerun():
    members = rack(passing_alone=True)
    actions = decide(site(*members, collectives=(collective(members),)))
    assert [a.kind for a in actions] == [K.ISOLATE]
    assert "failed 2 times while its 4 nodes passed in-node tests — re-running it cannot help: isolating" in (
        actions[0].reason
    )
    assert set(actions[0].device_ids) == {m.device_id for m in members}


def test_a_collective_failing_once_is_rerun_after_its_backoff():
    members = rack(passing_alone=True)
    assert kinds(site(*members, collectives=(collective(members, attempts=1),))) == [K.RERUN]


def test_isolation_waits_while_a_member_is_under_test_and_is_not_rerun_meanwhile():
    members = rack(passing_alone=True)
    members[0] = replace(members[0], under_test=True)
    assert kinds(site(*members, collectives=(collective(members),))) == []


def test_isolation_is_off_when_the_settings_say_so():
    members = rack(passing_alone=True)
    facts = site(*members, collectives=(collective(members),), settings=replace(ON, isolate=False))
    assert kinds(facts) == [K.RERUN]


def test_a_running_plan_is_advanced_and_its_cohort_held_back_from_reruns():
    members = rack(passing_alone=True, **failed_once)
    plan = PlanFacts(plan_id=uuid4(), running=True, created_at=NOW - timedelta(minutes=30))
    actions = decide(site(*members, collectives=(collective(members, plan=plan),)))
    assert [a.kind for a in actions] == [K.ADVANCE]
    assert actions[0].plan_id == plan.plan_id


def test_a_collective_waits_for_the_repair_of_the_culprit_its_plan_named():
    members = rack(passing_alone=True)
    plan = PlanFacts(plan_id=uuid4(), running=False, created_at=NOW - timedelta(minutes=30), culprits_await_repair=True)
    assert kinds(site(*members, collectives=(collective(members, plan=plan),))) == []


def test_a_collective_whose_isolation_named_nobody_is_held_for_a_person():
    members = rack(passing_alone=True)
    plan = PlanFacts(plan_id=uuid4(), running=False, created_at=NOW - timedelta(minutes=30), inconclusive=True)
    assert kinds(site(*members, collectives=(collective(members, attempts=5, plan=plan),))) == []


def test_a_collective_awaiting_its_evaluation_is_not_run_again():
    """Its job ended (the members are free) and its result is on its way: in progress, not rerun
    (found by the bring-up bench with real agents: every rack's collective ran twice)."""
    members = rack(passing_alone=True)
    awaiting = collective(members, verdict=Verdict.IN_PROGRESS, attempts=0, finished_at=None)
    assert kinds(site(*members, collectives=(awaiting,))) == []


def test_a_collective_waits_until_its_members_pass_alone():
    members = rack(not_run=1)
    actions = decide(site(*members, collectives=(collective(members, verdict=Verdict.NOT_RUN, attempts=0),)))
    assert [a.kind for a in actions] == [K.DISPATCH] * 4
    assert all(len(a.device_ids) == 1 for a in actions)


def test_the_first_nodes_of_a_rack_go_together():
    racks = [device(f"{r}-n{i}", rack=r, rack_size=4, not_run=1) for r in ("b", "a") for i in range(4)]
    actions = decide(site(*racks, settings=replace(ON, max_under_test=4)))
    chosen = {d.device_id for d in racks if d.rack == "a"}
    assert {a.device_ids[0] for a in actions} == chosen


def test_rack_share_limits_single_device_work_in_a_rack():
    members = rack(8, not_run=1)
    assert len(decide(site(*members, settings=replace(ON, rack_share=0.25)))) == rack_allowance(0.25, 8) == 2


def test_backoff_doubles_and_errored_waits_a_quarter():
    assert backoff_for(ON, Verdict.FAILED, 1) == timedelta(minutes=10)
    assert backoff_for(ON, Verdict.FAILED, 3) == timedelta(minutes=40)
    assert backoff_for(ON, Verdict.ERRORED, 1) == timedelta(minutes=2.5)


def test_a_class_limit_holds_below_the_sites():
    devices = [device(f"n{i}", rack=None, not_run=1) for i in range(5)]
    assert len(decide(site(*devices, class_limits={"gpu": 2}))) == 2


# --- properties -----------------------------------------------------------------------------

STATES = [s.value for s in DeviceState]


@st.composite
def sites(draw) -> SiteFacts:
    n_racks = draw(st.integers(1, 4))
    devices: list[DeviceFacts] = []
    collectives: list[CollectiveFacts] = []
    for r in range(n_racks):
        size = draw(st.integers(1, 8))
        members = []
        for i in range(size):
            failing = draw(st.sampled_from([None, Verdict.FAILED, Verdict.ERRORED]))
            members.append(
                DeviceFacts(
                    device_id=uuid4(),
                    hostname=f"r{r}n{i}",
                    resource_class=draw(st.sampled_from(["gpu", "mi300x"])),
                    state=draw(st.sampled_from(STATES)),
                    enrolled=draw(st.booleans()),
                    rack=f"r{r}",
                    rack_size=size,
                    under_test=draw(st.booleans()),
                    not_run=draw(st.integers(0, 2)),
                    failing=failing,
                    attempts=draw(st.integers(0, 4)),
                    last_finished_at=NOW - timedelta(minutes=draw(st.integers(0, 300))) if failing else None,
                    repair_after_failures=draw(st.sampled_from([None, 3])),
                    passing_alone=draw(st.booleans()),
                    certificate_valid_until=draw(st.sampled_from([None, NOW + timedelta(days=1)])),
                )
            )
        devices += members
        if draw(st.booleans()):
            collectives.append(
                collective(
                    members,
                    label=f"r{r}",
                    verdict=draw(st.sampled_from(list(Verdict))),
                    attempts=draw(st.integers(0, 3)),
                    plan=draw(
                        st.sampled_from(
                            [
                                None,
                                PlanFacts(uuid4(), running=True, created_at=NOW),
                                PlanFacts(uuid4(), False, NOW, True),
                            ]
                        )
                    ),
                )
            )
    settings_ = Settings(
        enabled=True,
        max_under_test=draw(st.integers(1, 20)),
        rack_share=draw(st.sampled_from([0.25, 0.5, 1.0])),
        backoff=timedelta(minutes=draw(st.integers(0, 60))),
        isolate=draw(st.booleans()),
    )
    return SiteFacts(
        site_id=uuid4(),
        slug="s",
        now=NOW,
        settings=settings_,
        devices=devices,
        collectives=collectives,
        open_breakers=frozenset(draw(st.sets(st.sampled_from(["gpu", "mi300x"]), max_size=1))),
        class_limits=draw(st.sampled_from([{}, {"gpu": 3}])),
    )


@settings(max_examples=300, deadline=None)
@given(sites())
def test_the_actions_never_exceed_the_blast_radius_nor_touch_an_ineligible_device(facts):
    actions = decide(facts)
    by_id = {d.device_id: d for d in facts.devices}
    under = {d.device_id for d in facts.devices if d.under_test}
    touched: list[UUID] = [i for a in actions for i in a.device_ids if i not in under]
    assert len(touched) == len(set(touched)), "a device in two actions"
    total = under | set(touched)
    assert len(total) <= max(facts.settings.max_under_test, len(under))
    for resource_class, limit in facts.class_limits.items():
        now_in = [i for i in total if by_id[i].resource_class == resource_class]
        before = [i for i in under if by_id[i].resource_class == resource_class]
        assert len(now_in) <= max(limit, len(before))
    for action in actions:
        for i in action.device_ids:
            d = by_id[i]
            assert d.resource_class not in facts.open_breakers
            if action.kind == K.RENEW:
                assert d.state == DeviceState.ACCEPTED and not d.under_test
            elif action.kind != K.ADVANCE:
                assert d.eligible and not d.under_test


def test_admit_skips_a_unit_that_does_not_fit_and_takes_a_later_one_that_does():
    one = Placed(uuid4(), "gpu", "a", 4)
    big = Unit(tuple(Placed(uuid4(), "gpu", "b", 4) for _ in range(4)), whole_rack=True)
    assert admit([big, Unit((one,))], under_test=[], radius=Radius(3)) == [Unit((one,))]


def test_untested_devices_go_before_a_collective_and_a_collective_waiting_for_room_holds_renewals():
    """A fault shows only once its device is tested: the first burn-in of untested devices takes
    the slots before a collective (a fault found late adds a whole repair at the end); a collective
    waiting for room holds the slots it needs against what comes after it (renewals)."""
    members = rack(4, passing_alone=True)
    busy = [device(f"b{i}", rack="b", not_run=1, under_test=True) for i in range(2)]
    waiting = [device(f"c{i}", rack="c", not_run=1) for i in range(2)]
    renewing = device("r0", rack="r", state=DeviceState.ACCEPTED, certificate_valid_until=NOW + timedelta(days=1))
    collectives = (collective(members, verdict=Verdict.NOT_RUN, attempts=0),)
    facts = site(*members, *busy, *waiting, renewing, collectives=collectives, settings=replace(ON, max_under_test=5))
    actions = decide(facts)
    assert [(a.kind, a.topology_id) for a in actions] == [(K.DISPATCH, None), (K.DISPATCH, None)]
    assert {a.device_ids[0] for a in actions} == {d.device_id for d in waiting}
    # once nothing untested is left, the collective waits for its 4 slots (1 free) and holds the renewal
    tested = [replace(d, not_run=0, passing_alone=True) for d in waiting]
    facts = site(*members, *busy, *tested, renewing, collectives=collectives, settings=replace(ON, max_under_test=5))
    assert kinds(facts) == []


def test_a_rerun_goes_before_the_first_burn_in_of_others():
    failing = device("z9", rack="z", **failed_once)
    fresh = [device(f"a{i}", rack="a", not_run=1) for i in range(3)]
    actions = decide(site(failing, *fresh, settings=replace(ON, max_under_test=1)))
    assert [(a.kind, a.device_ids) for a in actions] == [(K.RERUN, (failing.device_id,))]


def test_a_rack_larger_than_the_limit_blocks_nothing():
    members = rack(8, passing_alone=True)
    waiting = [device(f"c{i}", rack="c", not_run=1) for i in range(2)]
    facts = site(
        *members,
        *waiting,
        collectives=(collective(members, verdict=Verdict.NOT_RUN, attempts=0),),
        settings=replace(ON, max_under_test=4),
    )
    assert kinds(facts) == [K.DISPATCH, K.DISPATCH]


def test_a_device_whose_remediation_ladder_has_a_step_under_way_is_left_to_the_ladder():
    # the ladder runs the burn-in again after its step (docs/remediation.md): no rerun of the autopilot's own
    assert kinds(site(device(**failed_once))) == [K.RERUN]
    assert kinds(site(device(**failed_once, remedying=True))) == []
