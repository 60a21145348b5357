"""Culprit isolation for a failed rack cohort: which device's presence makes the collective fail.

The cohort's collective failed. Bisection: every *group* of suspects (at first, the whole cohort)
known to contain a culprit is split into two halves, and a diagnostic collective runs on each half
in the same round (the halves are disjoint, so no device is in two jobs). A half that fails is a
new group; a half that passes is **known good** (a device whose fault fails every collective that
includes it cannot have been in a passing subset). A half of one device is padded with a known-good
member (one not used elsewhere in the round), so every collective spans two nodes once that is
possible. A group of one is a **culprit**. A group both of whose halves pass stops narrowing
(a fault that needs several devices together, or a flaky one): its devices stay suspects and the
plan ends inconclusive for it.

For a single bad device in an n-device cohort this takes ⌈log2 n⌉ rounds; a plan is allowed
⌈log2 n⌉ + 1 (`max_rounds`) before it stops as inconclusive. An errored subset counts as failing:
the collective ran and did not complete with those devices. A subset that never ran (its job ended
without an execution: a lease lost on a slow satellite) is no evidence at all: the service runs it
again (`NO_EVIDENCE_TRIES`), and a subset that never ran stays unresolved, so no device is ever
named for a collective that did not run. Pure: the service stores the state as JSON.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Subset:
    """One diagnostic collective of a round: the suspects it tests and the devices it runs on
    (the suspects, plus a known-good member when the suspects are a single device)."""

    group: int  # index of the group it halves
    suspects: tuple[str, ...]
    devices: tuple[str, ...]


@dataclass(frozen=True)
class IsolationState:
    groups: tuple[tuple[str, ...], ...]  # each known to contain a culprit
    known_good: tuple[str, ...] = ()
    culprits: tuple[str, ...] = ()
    unresolved: tuple[tuple[str, ...], ...] = ()  # groups that stopped narrowing
    rounds: int = 0

    @property
    def finished(self) -> bool:
        return not self.groups

    def as_json(self) -> dict[str, object]:
        return {
            "groups": [list(g) for g in self.groups],
            "known_good": list(self.known_good),
            "culprits": list(self.culprits),
            "unresolved": [list(g) for g in self.unresolved],
            "rounds": self.rounds,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, object]) -> IsolationState:
        def groups(key: str) -> tuple[tuple[str, ...], ...]:
            raw = data.get(key) or []
            assert isinstance(raw, list)
            return tuple(tuple(str(d) for d in g) for g in raw)

        def ids(key: str) -> tuple[str, ...]:
            raw = data.get(key) or []
            assert isinstance(raw, list)
            return tuple(str(d) for d in raw)

        rounds = data.get("rounds", 0)
        assert isinstance(rounds, int)
        return cls(groups("groups"), ids("known_good"), ids("culprits"), groups("unresolved"), rounds)


@dataclass(frozen=True)
class RoundPlan:
    subsets: tuple[Subset, ...] = field(default_factory=tuple)


#: How many times a subset is dispatched before its group stops narrowing for want of evidence.
NO_EVIDENCE_TRIES = 3


def max_rounds(cohort_size: int) -> int:
    """⌈log2 n⌉ + 1: enough for one bad device in n, with one round to spare."""
    return math.ceil(math.log2(cohort_size)) + 1 if cohort_size > 1 else 1


def start(cohort: Sequence[str]) -> IsolationState:
    """The failed cohort run is round 0: the whole cohort is one group (sorted: a stable plan)."""
    members = tuple(sorted(set(cohort)))
    if not members:
        raise ValueError("an empty cohort has nothing to isolate")
    return _settle(IsolationState(groups=(members,)))


def _settle(state: IsolationState) -> IsolationState:
    """Groups of one are culprits."""
    singles = tuple(g[0] for g in state.groups if len(g) == 1)
    return IsolationState(
        groups=tuple(g for g in state.groups if len(g) > 1),
        known_good=state.known_good,
        culprits=tuple(sorted({*state.culprits, *singles})),
        unresolved=state.unresolved,
        rounds=state.rounds,
    )


def halves(group: Sequence[str]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    middle = (len(group) + 1) // 2
    return tuple(group[:middle]), tuple(group[middle:])


def next_round(state: IsolationState) -> RoundPlan:
    """The subsets of the next round: both halves of every group, singletons padded with a
    distinct known-good device while there is one to spare."""
    spare = list(state.known_good)
    subsets = []
    for index, group in enumerate(state.groups):
        for half in halves(group):
            devices = half
            if len(half) == 1 and spare:
                devices = (*half, spare.pop(0))
            subsets.append(Subset(index, half, devices))
    return RoundPlan(tuple(subsets))


def apply_round(state: IsolationState, plan: RoundPlan, passed: Sequence[bool | None]) -> IsolationState:
    """Narrow the suspects by one round's outcomes (`passed[i]` for `plan.subsets[i]`; None: the
    subset never ran, so its suspects stay suspects, unresolved, and are never named)."""
    if len(passed) != len(plan.subsets):
        raise ValueError("one outcome per subset")
    good = set(state.known_good)
    groups: list[tuple[str, ...]] = []
    unresolved = list(state.unresolved)
    for index, group in enumerate(state.groups):
        outcomes = [(s, ok) for s, ok in zip(plan.subsets, passed, strict=True) if s.group == index]
        failing = [s.suspects for s, ok in outcomes if ok is False]
        unknown = [s.suspects for s, ok in outcomes if ok is None]
        for subset, ok in outcomes:
            if ok:
                good.update(subset.devices)
        if failing:
            groups.extend(failing)
            unresolved.extend(unknown)
        else:
            unresolved.extend(unknown or [group])
    return _settle(
        IsolationState(
            groups=tuple(groups),
            known_good=tuple(sorted(good)),
            culprits=state.culprits,
            unresolved=tuple(unresolved),
            rounds=state.rounds + 1,
        )
    )


def give_up(state: IsolationState) -> IsolationState:
    """Stop: whatever is still a group is unresolved."""
    return IsolationState((), state.known_good, state.culprits, (*state.unresolved, *state.groups), state.rounds)
