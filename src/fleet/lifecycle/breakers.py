"""Automatic moves to repair behind the circuit breaker of each site × resource class: failing
too often, culprit isolation and a fatal Xid send devices to `needs_repair` through the lifecycle's
writer (`fleet.lifecycle.services.transitions_apply`) unless too many of one scope would go at once
(`fleet_rules.lifecycle.breaker_decide`: a share of the scope, or the minimum for a requirement no
device of the scope has passed — a wrong threshold); then the breaker opens and holds every further one
(recorded as `held_by_breaker`) until an operator closes it (`breaker_close`): then what it held goes
through, and its window starts over from the close."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import NamedTuple
from uuid import UUID

from django.db import connection
from django.utils import timezone

from fleet.core.exceptions import NotFoundError
from fleet.core.locks import locked_sql, scope_locks_sql
from fleet.core.statements import Statement
from fleet.events.outbox import BREAKER_PAGE, Draft, events_record
from fleet.lifecycle import metrics
from fleet.lifecycle.models import Breaker, DeviceStateChange
from fleet.lifecycle.services import SYSTEM, TABLES, Applied, AutomaticMove, Moved, json_refs, sql, transitions_apply
from fleet_rules import lifecycle as rules
from fleet_rules.eligibility import enrolled_sql
from fleet_rules.vocabulary import DeviceState, EventType, Mover, TransitionCause


class Scope(NamedTuple):
    site_id: UUID
    resource_class: str


LOCK_DEVICES = Statement(
    "lifecycle.lock_devices",
    locked_sql(
        TABLES["device"], "d", "d.site_id, d.resource_class", "d.id = ANY(string_to_array(%(devices)s, ',')::uuid[])"
    ),
    Scope,
    example=lambda: {"devices": ""},
)


class NoScope(NamedTuple):
    locked: int


#: One writer at a time decides a scope's breaker (after the devices: every writer locks devices
#: first, so the two lock kinds never wait on each other in opposite orders).
LOCK_SCOPES = Statement(
    "lifecycle.lock_scopes",
    scope_locks_sql("%(keys)s::text[]"),
    NoScope,
    example=lambda: {"keys": ["lon-1|gpu"]},
)


class BreakerFacts(NamedTuple):
    device_id: UUID
    hostname: str
    site_id: UUID
    site_slug: str
    resource_class: str
    state: str
    breaker_share: float | None
    breaker_window: timedelta | None
    enrolled: int
    recent: int
    #: The scope's moves within the window for the requirement this device's move names (0: none).
    recent_same: int
    breaker_open: bool
    #: The device's last repair: a move counted on failures from before it is stale.
    last_repair_at: datetime | None


BREAKER_FACTS = Statement(
    "lifecycle.breaker_facts",
    sql(
        """
SELECT d.id AS device_id, d.hostname, d.site_id, s.slug AS site_slug, d.resource_class, d.state,
       pol.breaker_share, pol.breaker_window,
       (SELECT count(*) FROM {device} e
        WHERE e.site_id = d.site_id AND e.resource_class = d.resource_class AND {enrolled}) AS enrolled,
       (SELECT count(*) FROM {change} h JOIN {device} e ON e.id = h.device_id
        WHERE h.to_state = %(needs_repair)s AND NOT h.held AND h.cause = ANY(%(guarded)s)
          AND h.at > GREATEST(%(now)s - COALESCE(pol.breaker_window, %(window)s), (
              SELECT max(b.closed_at) FROM {breaker} b
              WHERE b.site_id = d.site_id AND b.resource_class = d.resource_class))
          AND e.site_id = d.site_id AND e.resource_class = d.resource_class) AS recent,
       (SELECT count(*) FROM {change} h JOIN {device} e ON e.id = h.device_id
        WHERE h.to_state = %(needs_repair)s AND NOT h.held AND h.cause = ANY(%(suspect)s)
          AND h.refs ->> 'requirement' = c.requirement
          AND h.at > GREATEST(%(now)s - COALESCE(pol.breaker_window, %(window)s), (
              SELECT max(b.closed_at) FROM {breaker} b
              WHERE b.site_id = d.site_id AND b.resource_class = d.resource_class))
          AND e.site_id = d.site_id AND e.resource_class = d.resource_class) AS recent_same,
       EXISTS (SELECT 1 FROM {breaker} b
               WHERE b.site_id = d.site_id AND b.resource_class = d.resource_class AND b.closed_at IS NULL)
           AS breaker_open,
       (SELECT max(rp.created_at) FROM {repair} rp WHERE rp.device_id = d.id) AS last_repair_at
FROM unnest(string_to_array(%(devices)s, ',')::uuid[], %(requirements)s::text[]) AS c(device_id, requirement)
JOIN {device} d ON d.id = c.device_id
JOIN {site} s ON s.id = d.site_id
LEFT JOIN {policy} pol ON pol.resource_class = d.resource_class
ORDER BY d.id
""",
        enrolled=enrolled_sql("e"),
        **TABLES,
    ),
    BreakerFacts,
    example=lambda: {
        "devices": "",
        "requirements": [],
        "needs_repair": DeviceState.NEEDS_REPAIR.value,
        "guarded": sorted(c.value for c in rules.GUARDED_CAUSES),
        "suspect": sorted(c.value for c in rules.SUSPECT_CAUSES),
        "now": timezone.now(),
        "window": rules.BREAKER_WINDOW,
    },
)


@dataclass(frozen=True)
class Guarded:
    """What the guarded moves did: the moves made, the ones held, the breakers opened."""

    moved: list[Moved]
    held: list[AutomaticMove]
    opened: list[Breaker]


def _requirement_of(move: AutomaticMove) -> str | None:
    """The requirement a move to repair may make suspect (`rules.SUSPECT_CAUSES`: failing it too often);
    None for an isolation culprit or a fatal Xid."""
    name = move.refs.get("requirement") if move.cause in rules.SUSPECT_CAUSES else None
    return str(name) if name else None


#: Which of (site, resource class, requirement name) some device of the site and class has passed:
#: burn-in's to know (its projection), so it registers the reader in its `AppConfig.ready`, as it
#: registers the acceptance gate; the lifecycle sits below it and imports none of it.
PassedReader = Callable[[set[tuple[UUID, str, str]]], set[tuple[UUID, str, str]]]
_PASSED: list[PassedReader] = []


def requirement_passes_set(reader: PassedReader) -> None:
    _PASSED[:] = [reader]


def _passed(keys: set[tuple[UUID, str, str]]) -> set[tuple[UUID, str, str]]:
    """One query (none for no keys). Without a registered reader every requirement counts as
    passed: the suspect-requirement rule is off and the share alone guards (fail safe for repairs
    that are really due)."""
    if not keys or not _PASSED:
        return set(keys)
    return _PASSED[0](keys)


def _counted_before_a_repair(move: AutomaticMove, fact: BreakerFacts) -> bool:
    """A move for failing too often whose count saw no repair (or an older one) than the device's
    last: a sweep counted the failures, then a repair committed before the move locked the device
    (read committed), and the failures before a repair do not count after it."""
    if move.cause != TransitionCause.FAILED_TOO_OFTEN or "repaired_at" not in move.refs:
        return False
    seen = move.refs["repaired_at"]
    if fact.last_repair_at is None:
        return False
    return seen is None or fact.last_repair_at > datetime.fromisoformat(str(seen))


def _scope_key(scope: Scope) -> str:
    return f"{scope.site_id}|{scope.resource_class}"


def guarded_repair_moves_apply(moves: Sequence[AutomaticMove], *, now: datetime | None = None) -> Guarded:
    """Send devices to repair (failed too often, or named by isolation) unless the circuit breaker of
    their site × resource class holds them: in the caller's transaction, a constant number of
    statements whatever the number of moves (none when there are none)."""
    moves = list({m.device_id: m for m in moves}.values())
    if not moves:
        return Guarded([], [], [])
    now = now or timezone.now()
    ids = ",".join(str(m.device_id) for m in moves)
    with connection.cursor() as cursor:
        scopes = sorted(set(LOCK_DEVICES.rows(cursor, {"devices": ids})))
        LOCK_SCOPES.rows(cursor, {"keys": [_scope_key(s) for s in scopes]})
        facts = {
            f.device_id: f
            for f in BREAKER_FACTS.rows(
                cursor,
                {
                    "devices": ids,
                    "requirements": [_requirement_of(m) or "" for m in moves],
                    "needs_repair": DeviceState.NEEDS_REPAIR.value,
                    "guarded": sorted(c.value for c in rules.GUARDED_CAUSES),
                    "suspect": sorted(c.value for c in rules.SUSPECT_CAUSES),
                    "now": now,
                    "window": rules.BREAKER_WINDOW,
                },
            )
        }
    by_scope: dict[Scope, list[AutomaticMove]] = {}
    for move in moves:
        fact = facts.get(move.device_id)
        if fact is None or rules.refusal(fact.state, move.to, Mover.SYSTEM, move.cause) is not None:
            continue  # already moved, or in a state the table does not move from
        if _counted_before_a_repair(move, fact):
            continue  # a repair committed after its failures were counted: the next sweep counts again
        by_scope.setdefault(Scope(fact.site_id, fact.resource_class), []).append(move)
    admitted: list[AutomaticMove] = []
    held: list[AutomaticMove] = []
    opened: list[Breaker] = []
    passed = _passed(
        {
            (scope.site_id, scope.resource_class, name)
            for scope, wanted in by_scope.items()
            if not facts[wanted[0].device_id].breaker_open
            for name in map(_requirement_of, wanted)
            if name
        }
    )
    for scope, wanted in sorted(by_scope.items()):
        first = facts[wanted[0].device_id]
        share = first.breaker_share if first.breaker_share is not None else rules.BREAKER_SHARE
        names = [_requirement_of(m) for m in wanted]
        decision = rules.breaker_decide(
            wanted=len(wanted),
            recent=first.recent,
            enrolled=first.enrolled,
            is_open=first.breaker_open,
            share=share,
            minimum=rules.BREAKER_MINIMUM,
            requirements=names,
            recent_by_requirement={n: facts[m.device_id].recent_same for n, m in zip(names, wanted, strict=True) if n},
            passed=frozenset(n for (site_id, rc, n) in passed if (site_id, rc) == scope),
        )
        admitted += wanted[: decision.admitted]
        held += wanted[decision.admitted :]
        if decision.trips:
            window = first.breaker_window or rules.BREAKER_WINDOW
            if decision.suspect is not None:
                detail = (
                    f"{rules.BREAKER_MINIMUM} {scope.resource_class} devices at {first.site_slug} went to repair "
                    f"for {decision.suspect} within {_duration(window)} and no device of the class has passed it "
                    "— suspect the requirement's threshold or its test before the hardware."
                )
            else:
                detail = (
                    f"{first.recent + len(wanted)} of {first.enrolled} {scope.resource_class} devices at "
                    f"{first.site_slug} would go to repair within {_duration(window)} — suspect the test or the "
                    "policy before the hardware."
                )
            opened.append(
                Breaker(site_id=scope.site_id, resource_class=scope.resource_class, opened_at=now, detail=detail)
            )
    moved = transitions_apply([m.requested() for m in admitted], now=now).moved
    if held:
        DeviceStateChange.objects.bulk_create(
            [
                DeviceStateChange(
                    device_id=m.device_id,
                    from_state=facts[m.device_id].state,
                    to_state=m.to,
                    at=now,
                    actor=SYSTEM,
                    cause=TransitionCause.HELD_BY_BREAKER,
                    held=True,
                    reason=m.reason,
                    refs=json_refs(m.refs) | {"held_cause": m.cause.value},
                )
                for m in held
            ]
        )
        metrics.transitions_counted(TransitionCause.HELD_BY_BREAKER for _ in held)
    if opened:
        Breaker.objects.bulk_create(opened, ignore_conflicts=True)
        slugs = {(f.site_id, f.resource_class): f.site_slug for f in facts.values()}
        events_record(
            [breaker_event(b, slugs[(b.site_id, b.resource_class)], EventType.BREAKER_OPENED) for b in opened], now=now
        )
    return Guarded(moved, held, opened)


def breaker_event(breaker: Breaker, site_slug: str, kind: EventType) -> Draft:
    """The event of a breaker opened or reset (its subject: the site's class)."""
    data = {
        "breaker_id": str(breaker.id),
        "site": site_slug,
        "resource_class": breaker.resource_class,
        "detail": breaker.detail,
        "links": {"dashboard": BREAKER_PAGE.format(site=site_slug)},
    }
    if kind == EventType.BREAKER_RESET:
        data |= {"closed_by": breaker.closed_by, "reason": breaker.close_reason}
    return Draft(kind, f"sites/{site_slug}/breakers/{breaker.resource_class}", breaker.site_id, data)


@dataclass(frozen=True)
class Closed:
    """A breaker closed by an operator, and what became of the moves it let through."""

    breaker: Breaker
    applied: Applied


def breaker_close(*, breaker: Breaker, actor: str, reason: str, admitted: Sequence[AutomaticMove]) -> Closed:
    """Close an open breaker: the operator looked, and the hardware really is broken. The moves it
    held that still stand (`admitted`, judged by the caller) go through at once, whatever the
    limit, and the scope's window starts over from the close (`BREAKER_FACTS` counts the moves made
    after a scope's last close): neither the moves that tripped it nor those it lets through now
    trip it again. In the caller's transaction, in the lock order (`fleet.core.locks`): the devices,
    the scope, then the breaker, closed by compare-and-set (404 when it is closed already)."""
    now = timezone.now()
    moves = [replace(m, refs={**m.refs, "breaker": str(breaker.id)}) for m in admitted]
    with connection.cursor() as cursor:
        if moves:
            LOCK_DEVICES.rows(cursor, {"devices": ",".join(str(m.device_id) for m in moves)})
        LOCK_SCOPES.rows(cursor, {"keys": [_scope_key(Scope(breaker.site_id, breaker.resource_class))]})
    closed = Breaker.objects.filter(id=breaker.id, closed_at__isnull=True).update(
        closed_at=now, closed_by=actor, close_reason=reason.strip()
    )
    if not closed:
        raise NotFoundError(f"The breaker of {breaker.resource_class} was closed meanwhile.")
    breaker.refresh_from_db()
    return Closed(breaker, transitions_apply([m.requested() for m in moves], now=now))


def _duration(window: timedelta) -> str:
    minutes = int(window.total_seconds() // 60)
    return f"{minutes // 60} h" if minutes % 60 == 0 and minutes >= 60 else f"{minutes} min"
