"""The lifecycle table, the repair rule and the breaker, without a database."""

from __future__ import annotations

import itertools

import pytest

from fleet_rules.lifecycle import (
    AUTOMATIC_CAUSES,
    GUARDED_CAUSES,
    TRANSITIONS,
    automatic_sources,
    breaker_decide,
    breaker_limit,
    failed_too_often,
    needs_certificate,
    refusal,
    transition,
)
from fleet_rules.vocabulary import BURN_IN_STATES, DeviceState, Mover, TransitionCause

S, C, M = DeviceState, TransitionCause, Mover

ALLOWED = {
    # (from, to): movers that may cause it (the system only for its causes)
    (S.STAGED, S.BURN_IN): {M.OPERATOR, M.FLEET_FILE},
    (S.STAGED, S.ACCEPTED): {M.SYSTEM, M.OPERATOR, M.FLEET_FILE},
    (S.BURN_IN, S.ACCEPTED): {M.SYSTEM, M.OPERATOR, M.FLEET_FILE},
    (S.ACCEPTED, S.BURN_IN): {M.SYSTEM, M.OPERATOR, M.FLEET_FILE},
    (S.STAGED, S.NEEDS_REPAIR): {M.SYSTEM, M.OPERATOR, M.FLEET_FILE},
    (S.BURN_IN, S.NEEDS_REPAIR): {M.SYSTEM, M.OPERATOR, M.FLEET_FILE},
    (S.MAINTENANCE, S.NEEDS_REPAIR): {M.SYSTEM, M.OPERATOR, M.FLEET_FILE},
    (S.ACCEPTED, S.NEEDS_REPAIR): {M.SYSTEM},
    (S.NEEDS_REPAIR, S.BURN_IN): {M.SYSTEM},
    (S.MAINTENANCE, S.BURN_IN): {M.SYSTEM},
    (S.ACCEPTED, S.IN_SERVICE): {M.OPERATOR, M.FLEET_FILE},
    (S.IN_SERVICE, S.ACCEPTED): {M.OPERATOR, M.FLEET_FILE},
    (S.IN_SERVICE, S.MAINTENANCE): {M.OPERATOR, M.FLEET_FILE},
    (S.ACCEPTED, S.MAINTENANCE): {M.OPERATOR, M.FLEET_FILE},
    (S.NEEDS_REPAIR, S.MAINTENANCE): {M.OPERATOR, M.FLEET_FILE},
    (S.IN_SERVICE, S.BURN_IN): {M.OPERATOR, M.FLEET_FILE},
    (S.DECOMMISSIONED, S.STAGED): {M.OPERATOR, M.FLEET_FILE},
    **{(s, S.DECOMMISSIONED): {M.OPERATOR, M.FLEET_FILE} for s in S if s != S.DECOMMISSIONED},
}
SYSTEM_CAUSES = {
    (S.STAGED, S.ACCEPTED): {C.CERTIFICATE_ISSUED},
    (S.BURN_IN, S.ACCEPTED): {C.CERTIFICATE_ISSUED},
    (S.ACCEPTED, S.BURN_IN): {C.CERTIFICATE_SUPERSEDED, C.RENEWAL},
    (S.STAGED, S.NEEDS_REPAIR): {C.FAILED_TOO_OFTEN, C.ISOLATION, C.FATAL_XID},
    (S.BURN_IN, S.NEEDS_REPAIR): {C.FAILED_TOO_OFTEN, C.ISOLATION, C.FATAL_XID},
    (S.MAINTENANCE, S.NEEDS_REPAIR): {C.FAILED_TOO_OFTEN, C.ISOLATION, C.FATAL_XID},
    (S.ACCEPTED, S.NEEDS_REPAIR): {C.FATAL_XID},
    (S.NEEDS_REPAIR, S.BURN_IN): {C.REPAIR},
    (S.MAINTENANCE, S.BURN_IN): {C.REPAIR},
}
PERSON_CAUSE = {M.OPERATOR: C.OPERATOR, M.FLEET_FILE: C.FLEET_FILE}


@pytest.mark.parametrize(("source", "to"), list(itertools.product(S, S)))
def test_every_pair_of_states_is_allowed_exactly_as_the_table_says(source, to):
    for mover in M:
        causes = SYSTEM_CAUSES.get((source, to), set()) if mover == M.SYSTEM else {PERSON_CAUSE[mover]}
        for cause in C:
            expected = mover in ALLOWED.get((source, to), set()) and cause in causes
            answer = refusal(source, to, mover, cause)
            assert (answer is None) == expected, (source, to, mover, cause, answer)
            if answer is not None:
                assert answer.endswith(".") and len(answer) > 20


def test_a_repair_is_the_only_way_out_of_needs_repair_into_burn_in():
    why = refusal(S.NEEDS_REPAIR, S.BURN_IN, M.OPERATOR, C.OPERATOR)
    assert why is not None and "repair is recorded" in why and "/repairs/" in why


def test_an_impossible_move_names_where_the_device_may_go():
    why = refusal(S.NEEDS_REPAIR, S.ACCEPTED, M.OPERATOR, C.OPERATOR)
    assert why is not None
    assert "cannot move from needs_repair to accepted" in why
    assert "burn_in" in why and "maintenance" in why and "decommissioned" in why


def test_the_table_has_one_row_per_pair():
    pairs = [(s, row.to) for row in TRANSITIONS for s in row.sources]
    assert len(pairs) == len(set(pairs))


def test_a_fatal_xid_moves_a_burning_or_accepted_device_to_repair_but_never_one_in_service():
    assert automatic_sources(S.NEEDS_REPAIR, C.FATAL_XID) == {S.STAGED, S.BURN_IN, S.MAINTENANCE, S.ACCEPTED}
    assert refusal(S.IN_SERVICE, S.NEEDS_REPAIR, M.SYSTEM, C.FATAL_XID) is not None
    # failing too often still moves only burning devices: an accepted one's certificate is superseded first
    assert automatic_sources(S.NEEDS_REPAIR, C.FAILED_TOO_OFTEN) == {S.STAGED, S.BURN_IN, S.MAINTENANCE}
    # only the service moves an accepted device to repair, and says when
    why = refusal(S.ACCEPTED, S.NEEDS_REPAIR, M.OPERATOR, C.OPERATOR)
    assert why is not None and "fatal Xid" in why


def test_a_fatal_xid_is_automatic_and_behind_the_breaker():
    assert C.FATAL_XID in AUTOMATIC_CAUSES and C.FATAL_XID in GUARDED_CAUSES


def test_a_cause_the_service_never_moves_for_is_an_error():
    with pytest.raises(ValueError, match="never moves"):
        automatic_sources(S.IN_SERVICE, C.FATAL_XID)


def test_needs_repair_is_not_burn_in_eligible():
    assert S.NEEDS_REPAIR not in BURN_IN_STATES


def test_people_need_a_certificate_to_accept_or_to_put_into_service_and_the_system_does_not():
    assert needs_certificate(S.BURN_IN, S.ACCEPTED, M.OPERATOR)
    assert needs_certificate(S.ACCEPTED, S.IN_SERVICE, M.FLEET_FILE)
    assert not needs_certificate(S.BURN_IN, S.ACCEPTED, M.SYSTEM)
    assert not needs_certificate(S.IN_SERVICE, S.MAINTENANCE, M.OPERATOR)
    assert transition(S.NEEDS_REPAIR, S.ACCEPTED) is None


@pytest.mark.parametrize(
    ("failures", "after", "due"), [(2, 3, False), (3, 3, True), (4, 3, True), (1, 1, True), (9, 0, False)]
)
def test_a_device_goes_to_repair_on_the_nth_failure_since_its_repair(failures, after, due):
    assert failed_too_often(failures, after) is due


def test_the_breaker_limit_is_a_share_of_the_enrolled_devices_and_at_least_the_minimum():
    assert breaker_limit(40, share=0.2, minimum=3) == 8
    assert breaker_limit(10, share=0.2, minimum=3) == 3
    assert breaker_limit(0, share=0.2, minimum=3) == 3


def test_the_breaker_admits_up_to_its_limit_and_holds_the_rest():
    assert breaker_decide(wanted=2, recent=5, enrolled=40, is_open=False, share=0.2, minimum=3)[:3] == (2, 0, False)
    assert breaker_decide(wanted=5, recent=5, enrolled=40, is_open=False, share=0.2, minimum=3)[:3] == (3, 2, True)
    assert breaker_decide(wanted=1, recent=8, enrolled=40, is_open=False, share=0.2, minimum=3)[:3] == (0, 1, True)


# A suspect requirement: one no device of the scope has passed. Scope: 100 enrolled, share 20 %
# (limit 20), minimum 3. Each case: the wanted moves' requirements, the scope's moves within the
# window by requirement, the requirements some device passed → (admitted, held, trips, suspect).
SUSPECT_CASES = {
    "a wrong threshold: a whole class fails one requirement; the third opens it": (
        ["gpu-diag"] * 30,
        {},
        set(),
        (3, 27, True, "gpu-diag"),
    ),
    "the same, arriving one page at a time: two went before, the next opens it": (
        ["gpu-diag"] * 5,
        {"gpu-diag": 2},
        set(),
        (1, 4, True, "gpu-diag"),
    ),
    "already at the minimum within the window (a breaker closed before): held at once": (
        ["gpu-diag"],
        {"gpu-diag": 3},
        set(),
        (0, 1, True, "gpu-diag"),
    ),
    "another device passed it: broken hardware, up to the share": (
        ["gpu-diag"] * 5,
        {"gpu-diag": 4},
        {"gpu-diag"},
        (5, 0, False, None),
    ),
    "below the minimum: nothing trips": (["gpu-diag"] * 2, {}, set(), (2, 0, False, None)),
    "different requirements count apart": (
        ["gpu-diag", "gpu-stress", "gpu-diag", "gpu-stress"],
        {},
        set(),
        (4, 0, False, None),
    ),
    "moves that name no requirement (a fatal Xid) count only toward the share": (
        [None] * 5,
        {},
        set(),
        (5, 0, False, None),
    ),
    "the share trips first: its detail (how many would go) is the breaker's": (
        ["gpu-diag"] * 30,
        {},
        {"gpu-diag"},
        (20, 10, True, None),
    ),
}


@pytest.mark.parametrize("case", SUSPECT_CASES, ids=list(SUSPECT_CASES))
def test_a_suspect_requirement_opens_the_breaker_at_the_minimum(case):
    requirements, recent_by_requirement, passed, expected = SUSPECT_CASES[case]
    decision = breaker_decide(
        wanted=len(requirements),
        recent=sum(recent_by_requirement.values()),
        enrolled=100,
        is_open=False,
        share=0.2,
        minimum=3,
        requirements=requirements,
        recent_by_requirement=recent_by_requirement,
        passed=frozenset(passed),
    )
    assert tuple(decision) == expected


def test_an_open_breaker_holds_every_move():
    assert breaker_decide(wanted=1, recent=0, enrolled=40, is_open=True, share=0.2, minimum=3)[:3] == (0, 1, False)
