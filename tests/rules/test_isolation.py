"""Culprit isolation: the bisection planner, by table and by property."""

from __future__ import annotations

import math

from hypothesis import given
from hypothesis import strategies as st

from fleet_rules.isolation import IsolationState, apply_round, give_up, max_rounds, next_round, start


def isolate(cohort, culprits, *, limit=None):
    """Run the planner against a fabric model: a collective fails iff it includes a culprit."""
    state = start(cohort)
    rounds = []
    limit = limit or max_rounds(len(cohort))
    while not state.finished and state.rounds < limit:
        plan = next_round(state)
        used = [d for s in plan.subsets for d in s.devices]
        assert len(used) == len(set(used)), "a device in two subsets of one round"
        rounds.append([s.devices for s in plan.subsets])
        state = apply_round(state, plan, [not (set(s.devices) & set(culprits)) for s in plan.subsets])
    return (state if state.finished else give_up(state)), rounds


def test_a_rack_of_8_with_one_bad_device_takes_3_rounds():
    cohort = [f"n{i}" for i in range(8)]
    state, rounds = isolate(cohort, {"n5"})
    assert state.culprits == ("n5",) and not state.unresolved
    assert rounds == [
        [("n0", "n1", "n2", "n3"), ("n4", "n5", "n6", "n7")],
        [("n4", "n5"), ("n6", "n7")],
        [("n4", "n0"), ("n5", "n1")],  # singletons padded with known-good members
    ]
    assert len(rounds) <= math.ceil(math.log2(8)) + 1 == max_rounds(8) == 4


def test_two_cohort_members_cannot_both_be_padded_before_anything_is_known():
    state, rounds = isolate(["a", "b"], {"b"})
    assert rounds == [[("a",), ("b",)]] and state.culprits == ("b",)


def test_a_fault_that_needs_two_devices_together_ends_unresolved():
    """Both halves pass although the whole failed: the group stops narrowing."""
    state = start(["a", "b", "c", "d"])
    plan = next_round(state)
    after = apply_round(state, plan, [True, True])
    assert after.finished and after.culprits == () and after.unresolved == (("a", "b", "c", "d"),)


def test_the_state_survives_json():
    state = apply_round(start(list("abcdef")), next_round(start(list("abcdef"))), [False, True])
    assert IsolationState.from_json(state.as_json()) == state


@given(
    st.integers(2, 40).flatmap(
        lambda n: st.tuples(st.just(n), st.sets(st.integers(0, n - 1), min_size=1, max_size=min(3, n)))
    )
)
def test_every_culprit_is_found_and_nothing_else(case):
    n, bad = case
    cohort = [f"d{i:02d}" for i in range(n)]
    culprits = {cohort[i] for i in bad}
    state, rounds = isolate(cohort, culprits, limit=50)
    assert set(state.culprits) == culprits and not state.unresolved
    assert not culprits & set(state.known_good)
    if len(culprits) == 1:
        assert len(rounds) <= math.ceil(math.log2(n)) < max_rounds(n)


def test_a_subset_that_never_ran_names_nobody_and_its_suspects_stay_unresolved():
    cohort = [f"n{i}" for i in range(8)]
    state = start(cohort)
    plan = next_round(state)  # n0..n3 | n4..n7
    state = apply_round(state, plan, [None, True])
    assert state.finished and not state.culprits
    assert state.unresolved == (("n0", "n1", "n2", "n3"),) and state.known_good == ("n4", "n5", "n6", "n7")
    # A failing half still narrows; a half that never ran beside it stays a suspect, unnamed
    state = apply_round(start(cohort), plan, [False, None])
    assert state.groups == (("n0", "n1", "n2", "n3"),) and state.unresolved == (("n4", "n5", "n6", "n7"),)


@given(
    st.integers(2, 24).flatmap(
        lambda n: st.tuples(st.just(n), st.integers(0, n - 1), st.lists(st.booleans(), min_size=64, max_size=64))
    )
)
def test_collectives_that_never_ran_never_name_a_good_device(case):
    n, bad, ran = case
    cohort = [f"d{i:02d}" for i in range(n)]
    state, used = start(cohort), iter(ran)
    while not state.finished and state.rounds < 50:
        plan = next_round(state)
        state = apply_round(
            state, plan, [(cohort[bad] not in s.devices) if next(used, True) else None for s in plan.subsets]
        )
    assert set(state.culprits) <= {cohort[bad]}
