"""The device lifecycle: which state changes are allowed, who may cause each, and the two rules
that move devices on their own — "failed too often since its last repair" and the circuit breaker
that holds those moves when too many devices of one site and class would go at once.

One table (`TRANSITIONS`) is the whole rule: the one writer of state changes
(`fleet.lifecycle.services.transitions_apply`) compares each locked state with `allowed_sources`,
explains a refused move with the sentence `refusal` returns (the API's 409), and docs/lifecycle.md's
table is held to this one by a test. Pure: no Django.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from datetime import timedelta
from typing import NamedTuple

from fleet_rules.vocabulary import DeviceState, Mover, TransitionCause

S = DeviceState
C = TransitionCause

#: The policy settings' defaults (`AcceptancePolicy`): how many failures of one target since the
#: last repair send a device to repair, and the breaker's share, floor and window.
REPAIR_AFTER_FAILURES = 3
BREAKER_SHARE = 0.2
BREAKER_MINIMUM = 3
BREAKER_WINDOW = timedelta(hours=1)

#: Automatic causes: only the system causes these, and the breaker guards those into `needs_repair`.
AUTOMATIC_CAUSES: frozenset[TransitionCause] = frozenset(
    {C.CERTIFICATE_ISSUED, C.CERTIFICATE_SUPERSEDED, C.FAILED_TOO_OFTEN, C.ISOLATION, C.FATAL_XID}
)
#: The automatic moves the breaker guards: a wrong policy or a broken test would make every device
#: of a class "broken hardware" at once (and a driver or kernel bug could log a "fatal" Xid on all of
#: them).
GUARDED_CAUSES: frozenset[TransitionCause] = frozenset({C.FAILED_TOO_OFTEN, C.ISOLATION, C.FATAL_XID})
#: The moves that can make their requirement suspect (`breaker_decide`): failing it too often is what a wrong
#: threshold looks like. Culprit isolation is not: it names a device because subsets of the same collective
#: passed the same requirement without it (the known good), so its moves count toward the share only.
SUSPECT_CAUSES: frozenset[TransitionCause] = frozenset({C.FAILED_TOO_OFTEN})


@dataclass(frozen=True)
class Transition:
    """One row of the table: from these states to `to`, caused by these movers (and, for the
    system, only by these causes). `certificate`: a person or the fleet file moving a device here
    needs a valid certificate, or force with a reason and the override permission."""

    sources: frozenset[DeviceState]
    to: DeviceState
    movers: frozenset[Mover]
    causes: frozenset[TransitionCause] = frozenset()
    certificate: bool = False
    why: str = ""


def _t(
    sources: Iterable[DeviceState],
    to: DeviceState,
    movers: Iterable[Mover],
    causes: Iterable[TransitionCause] = (),
    *,
    certificate: bool = False,
    why: str = "",
) -> Transition:
    return Transition(frozenset(sources), to, frozenset(movers), frozenset(causes), certificate, why)


_PEOPLE = (Mover.OPERATOR, Mover.FLEET_FILE)
_PERSON_CAUSE = {Mover.OPERATOR: C.OPERATOR, Mover.FLEET_FILE: C.FLEET_FILE}
_BURNING = (S.STAGED, S.BURN_IN, S.MAINTENANCE)

TRANSITIONS: tuple[Transition, ...] = (
    _t([S.STAGED], S.BURN_IN, _PEOPLE, why="burn-in starts"),
    _t(
        [S.STAGED, S.BURN_IN],
        S.ACCEPTED,
        (Mover.SYSTEM, *_PEOPLE),
        [C.CERTIFICATE_ISSUED],
        certificate=True,
        why="its certificate is issued (automatic when the policy's auto_accept is on)",
    ),
    _t(
        [S.ACCEPTED],
        S.BURN_IN,
        (Mover.SYSTEM, *_PEOPLE),
        [C.CERTIFICATE_SUPERSEDED, C.RENEWAL],
        why="its certificate no longer holds, or expires soon while it is not in service (the autopilot's renewal)",
    ),
    _t(
        _BURNING,
        S.NEEDS_REPAIR,
        (Mover.SYSTEM, *_PEOPLE),
        [C.FAILED_TOO_OFTEN, C.ISOLATION, C.FATAL_XID],
        why="it failed too often since its last repair, culprit isolation named it, or its burn-in logged a fatal Xid",
    ),
    # A device accepted while its last job still ran: the job's health window logged a fatal Xid, so
    # the acceptance stands on evidence the hardware has since contradicted. Only the service moves it.
    _t(
        [S.ACCEPTED],
        S.NEEDS_REPAIR,
        (Mover.SYSTEM,),
        [C.FATAL_XID],
        why="a burn-in of the device logged a fatal Xid",
    ),
    _t([S.NEEDS_REPAIR, S.MAINTENANCE], S.BURN_IN, (Mover.SYSTEM,), [C.REPAIR], why="a repair is recorded"),
    _t([S.ACCEPTED], S.IN_SERVICE, _PEOPLE, certificate=True, why="it goes into service"),
    _t([S.IN_SERVICE], S.ACCEPTED, _PEOPLE, certificate=True, why="it leaves service, still certified"),
    _t([S.IN_SERVICE, S.ACCEPTED], S.MAINTENANCE, _PEOPLE, why="it is taken out for maintenance"),
    _t([S.NEEDS_REPAIR], S.MAINTENANCE, _PEOPLE, why="the repair is under way"),
    _t([S.IN_SERVICE], S.BURN_IN, _PEOPLE, why="it is burned in again"),
    _t(
        [S.STAGED, S.BURN_IN, S.ACCEPTED, S.IN_SERVICE, S.MAINTENANCE, S.NEEDS_REPAIR],
        S.DECOMMISSIONED,
        _PEOPLE,
        why="it leaves the fleet",
    ),
    _t([S.DECOMMISSIONED], S.STAGED, _PEOPLE, why="it is brought back"),
)


def transition(source: DeviceState | str, to: DeviceState | str) -> Transition | None:
    """The table's row for this change, if any."""
    for row in TRANSITIONS:
        if to == row.to and source in row.sources:
            return row
    return None


def transition_sources(to: DeviceState) -> frozenset[DeviceState]:
    """Every state a device may move to `to` from."""
    return frozenset(s for row in TRANSITIONS if row.to == to for s in row.sources)


def automatic_sources(to: DeviceState, cause: TransitionCause) -> frozenset[DeviceState]:
    """The states the service moves a device from to `to` for `cause` (its rows of the table)."""
    rows = [r for r in TRANSITIONS if r.to == to and cause in r.causes]
    if not rows:
        raise ValueError(f"the service never moves a device to {to.value} for {cause.value}")
    return frozenset(s for row in rows for s in row.sources)


def allowed_sources(
    to: DeviceState, mover: Mover, cause: TransitionCause, *, certified: bool = False
) -> frozenset[DeviceState]:
    """Every state the table lets `mover` move a device from to `to` for `cause`; a move a person
    or the fleet file makes into an accepted state only when `certified` (a valid certificate, or
    a recorded override). What the lifecycle's writer compares the locked state with."""
    return frozenset(
        s
        for s in DeviceState
        if refusal(s, to, mover, cause) is None and (certified or not needs_certificate(s, to, mover))
    )


def refusal(source: DeviceState | str, to: DeviceState | str, mover: Mover, cause: TransitionCause) -> str | None:
    """None when the table allows `mover` to move a device from `source` to `to` for `cause`;
    otherwise the sentence that says which rule refuses it (the 409's message)."""
    source, to = DeviceState(source), DeviceState(to)
    if source == to:
        return f"The device is already {to.value}."
    row = transition(source, to)
    if row is None:
        allowed = sorted(r.to.value for r in TRANSITIONS if source in r.sources)
        return (
            f"A device cannot move from {source.value} to {to.value}; from {source.value} it may move to "
            f"{', '.join(allowed) or 'nothing'}."
        )
    if mover not in row.movers:
        if row.movers == frozenset({Mover.SYSTEM}) and C.REPAIR in row.causes:
            return (
                f"A device moves from {source.value} to {to.value} only when a repair is recorded "
                "(POST /api/v1/devices/{id}/repairs/), so that attempts before the repair stop counting."
            )
        return f"Only the service moves a device from {source.value} to {to.value}: when {row.why}."
    if mover == Mover.SYSTEM and cause not in row.causes:
        return f"The service moves a device from {source.value} to {to.value} only when {row.why}."
    if mover != Mover.SYSTEM and cause != _PERSON_CAUSE[mover]:
        return f"A change made by the {mover.value.replace('_', ' ')} has the cause {_PERSON_CAUSE[mover].value}."
    return None


def needs_certificate(source: DeviceState | str, to: DeviceState | str, mover: Mover) -> bool:
    """A person or the fleet file moving a device into an accepted state needs its valid
    certificate (or a recorded override); the system moves it there only on issuance."""
    row = transition(source, to)
    return row is not None and row.certificate and mover != Mover.SYSTEM


def failed_too_often(failures_since_repair: int, repair_after_failures: int) -> bool:
    """A target that failed this many times since the device's last repair (under the current
    policy version; errors do not count: an error is not a failure of the hardware) sends it to
    repair."""
    return repair_after_failures > 0 and failures_since_repair >= repair_after_failures


def breaker_limit(enrolled: int, *, share: float = BREAKER_SHARE, minimum: int = BREAKER_MINIMUM) -> int:
    """How many automatic moves to repair a site × class may take within the window before the
    breaker trips: `share` of its enrolled devices, and at least `minimum`."""
    return max(minimum, math.floor(share * enrolled))


class BreakerDecision(NamedTuple):
    """Of the `wanted` moves of one scope (in the order given), the first `admitted` go ahead and
    the rest are held; `trips` when this decision opens the breaker. `suspect`: the requirement
    that opened it as a suspect (`breaker_decide`), None when the share did or nothing tripped."""

    admitted: int
    held: int
    trips: bool
    suspect: str | None = None


def breaker_decide(
    *,
    wanted: int,
    recent: int,
    enrolled: int,
    is_open: bool,
    share: float,
    minimum: int,
    requirements: Sequence[str | None] = (),
    recent_by_requirement: Mapping[str, int] | None = None,
    passed: AbstractSet[str] = frozenset(),
) -> BreakerDecision:
    """Admit automatic moves to repair while `recent` (those already made within the window) plus
    the admitted stay within the limit (`breaker_limit`); hold every one while the breaker is open.

    A **suspect requirement** opens it sooner: a requirement that no device of the scope has passed
    (not in `passed`) and that `minimum` devices of the scope failed too often within the window
    (`recent_by_requirement` before this decision, plus the admitted) is more likely a wrong
    threshold or a broken test than `minimum` broken devices, so the move that brings it to
    `minimum` is the last admitted and the breaker opens with it. `requirements`: the requirement of
    each wanted move, in the same order (None, or a move past the end, for a move that names none:
    a fatal Xid)."""
    if is_open:
        return BreakerDecision(0, wanted, False)
    room = max(0, breaker_limit(enrolled, share=share, minimum=minimum) - recent)
    counts = dict(recent_by_requirement or {})
    admitted = 0
    suspect: str | None = None
    for index in range(wanted):
        if admitted >= room:
            break
        requirement = requirements[index] if index < len(requirements) else None
        watched = requirement if requirement is not None and requirement not in passed else None
        if watched is not None and counts.get(watched, 0) >= minimum:
            suspect = watched  # already at the minimum (a window that started before): hold it
            break
        admitted += 1
        if watched is not None:
            counts[watched] = counts.get(watched, 0) + 1
            if counts[watched] >= minimum:
                suspect = watched
                break
    held = wanted - admitted
    if held > 0 and admitted >= room:
        suspect = None  # the share tripped (it says more: how many would have gone)
    return BreakerDecision(admitted, held, held > 0 or suspect is not None, suspect)
