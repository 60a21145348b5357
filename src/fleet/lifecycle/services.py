"""Every change of a device's lifecycle state goes through here: the table of `fleet_rules.lifecycle`
is checked, the device and a history entry are written in the same transaction, and the change is
counted. A refused change is a 409 naming the rule.

Two ways in: `device_transition` for one device moved by a person, the fleet file or a repair
(locks the device, checks, writes; `device_move` is an operator's, through the acceptance gate);
`automatic_moves_apply` for the moves the evidence causes on a
reconcile page (one statement for the whole page: lock, compare-and-set on the expected states,
history), so the page sends a constant number of statements whatever it moves.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, NamedTuple
from uuid import UUID

from django.db import connection, transaction
from django.utils import timezone

from fleet.core.exceptions import Conflict, FleetError
from fleet.core.rows import recordset
from fleet.core.statements import Statement
from fleet.inventory.models import Device, Site
from fleet.lifecycle import metrics
from fleet.lifecycle.models import Breaker, DeviceStateChange
from fleet.policies.models import AcceptancePolicy
from fleet_rules import lifecycle as rules
from fleet_rules.eligibility import enrolled_sql
from fleet_rules.vocabulary import DeviceState, Mover, TransitionCause

SYSTEM = Mover.SYSTEM.value
_TABLES = {
    "device": Device._meta.db_table,
    "site": Site._meta.db_table,
    "breaker": Breaker._meta.db_table,
    "change": DeviceStateChange._meta.db_table,
    "policy": AcceptancePolicy._meta.db_table,
}


def _sql(template: str, **tables: str) -> str:
    """A SQL template with table names filled in (constants only; values travel as parameters)."""
    return template.format(**tables)


@dataclass(frozen=True)
class Changed:
    """What a transition did: the device as it now is, and its history entry (None when nothing
    changed)."""

    device: Device
    change: DeviceStateChange | None


@transaction.atomic
def device_transition(
    *,
    device_id: UUID,
    to: DeviceState,
    mover: Mover,
    actor: str,
    reason: str = "",
    refs: Mapping[str, Any] | None = None,
    certified: bool = False,
    force: bool = False,
    cause: TransitionCause | None = None,
) -> Changed:
    """Move one device (locked first) to `to` if the table lets `mover` do it. A move into an
    accepted state by a person or the fleet file needs `certified`, or `force` with a reason."""
    cause = cause or _person_cause(mover)
    # FOR NO KEY UPDATE, as every other locker of devices (`fleet.core.locks`): a caller may hold
    # that lock already, and upgrading it would wait on reports merely referencing the device.
    device = Device.objects.select_for_update(no_key=True).get(id=device_id)
    refused = rules.refusal(device.state, to, mover, cause)
    if refused is not None:
        raise Conflict(f"{device.hostname}: {refused}")
    if rules.needs_certificate(device.state, to, mover) and not certified:
        if not force:
            raise Conflict(
                f"{device.hostname} holds no valid acceptance certificate, so it cannot move to {to}: let burn-in "
                "finish, or force with a reason (recorded)."
            )
        if not reason.strip():
            raise FleetError("A forced change needs a reason.", field_errors={"reason": ["Say why (it is recorded)."]})
    now = timezone.now()
    change = DeviceStateChange.objects.create(
        device=device,
        from_state=device.state,
        to_state=to,
        at=now,
        actor=actor,
        cause=cause,
        reason=reason.strip(),
        refs=dict(refs or {}) | ({"forced": True} if force and not certified else {}),
    )
    device.state = to
    device.save(update_fields=["state", "updated_at"])
    metrics.transitions_counted([cause])
    return Changed(device, change)


@dataclass(frozen=True)
class AcceptanceGate:
    """What a move into an accepted state asks of certificates, which are burn-in's (it registers
    its gate in its `AppConfig.ready`: the lifecycle sits below burn-in and imports none of it).
    `uncertified`: which of these devices hold no valid certificate (one query); `override_record`:
    record who forced one device without one, and why (returns the record);
    `override_permission`: what a person needs to force."""

    uncertified: Callable[[Iterable[UUID]], set[UUID]]
    override_record: Callable[..., Any]
    override_permission: str


_GATE: list[AcceptanceGate] = []


def acceptance_gate_set(gate: AcceptanceGate) -> None:
    _GATE[:] = [gate]


def acceptance_gate() -> AcceptanceGate:
    """The registered gate (fail closed: without one, nothing moves into an accepted state)."""
    if not _GATE:
        raise RuntimeError("no acceptance gate registered (fleet.burnin registers it in its AppConfig.ready)")
    return _GATE[0]


@dataclass(frozen=True)
class OperatorMoved:
    """An operator's move: the device as it now is, its history entry, and the override recorded
    when it was forced into an accepted state without a valid certificate."""

    device: Device
    change: DeviceStateChange | None
    override: Any


@transaction.atomic
def device_move(
    *, device_id: UUID, to: DeviceState, actor: str, reason: str = "", force: bool = False
) -> OperatorMoved:
    """An operator's lifecycle change, checked by the lifecycle table; a move into an accepted state
    needs the device's valid certificate, or force with a reason (the override is recorded)."""
    gate = acceptance_gate()
    device = Device.objects.select_for_update(no_key=True).get(id=device_id)
    gated = rules.needs_certificate(device.state, to, Mover.OPERATOR)
    certified = not (gated and gate.uncertified([device.id]))
    changed = device_transition(
        device_id=device.id, to=to, mover=Mover.OPERATOR, actor=actor, reason=reason, certified=certified, force=force
    )
    override = None
    if not certified:
        override = gate.override_record(device_id=device.id, actor=actor, reason=reason.strip())
    return OperatorMoved(changed.device, changed.change, override)


def _person_cause(mover: Mover) -> TransitionCause:
    if mover == Mover.FLEET_FILE:
        return TransitionCause.FLEET_FILE
    if mover == Mover.OPERATOR:
        return TransitionCause.OPERATOR
    raise ValueError("an automatic move names its cause")


@dataclass(frozen=True)
class AutomaticMove:
    """A move the evidence causes: to `to`, for `cause`, from whichever of the table's states the
    device is in when the statement locks it (in any other state it stays: compare-and-set)."""

    device_id: UUID
    to: DeviceState
    cause: TransitionCause
    reason: str = ""
    refs: Mapping[str, Any] = field(default_factory=dict)


class Moved(NamedTuple):
    device_id: UUID
    from_state: str
    to_state: str
    cause: str


#: After a `wanted` CTE of moves (device, to_state, cause, sources, reason, refs): lock the devices
#: (primary-key order, as every other writer of devices), move those in a state the table allows for
#: their cause (and, for an issued certificate, only where the policy auto-accepts), and write their
#: history. `MOVE` is this alone; certificate issuance runs it inside its own insert
#: (`fleet.burnin.certificates.issuance`), so a reconcile page pays no extra statement for its moves.
MOVE_CHAIN = _sql(
    """
locked AS (
    SELECT d.id, d.state, d.resource_class FROM {device} d
    WHERE d.id IN (SELECT device FROM wanted) ORDER BY d.id FOR NO KEY UPDATE
), chosen AS (
    SELECT l.id, l.state AS from_state, w.to_state, w.cause, w.reason, w.refs FROM locked l
    JOIN wanted w ON w.device = l.id
    WHERE l.state = ANY(string_to_array(w.sources, ','))
      AND (w.cause <> %(issued)s OR EXISTS (
          SELECT 1 FROM {policy} p WHERE p.resource_class = l.resource_class AND p.auto_accept))
), moved AS (
    UPDATE {device} d SET state = c.to_state, updated_at = %(now)s FROM chosen c WHERE d.id = c.id
    RETURNING d.id
), history AS (
    INSERT INTO {change} (id, device_id, from_state, to_state, at, actor, cause, held, reason, refs)
    SELECT gen_random_uuid(), c.id, c.from_state, c.to_state, %(now)s, %(actor)s, c.cause, false, c.reason, c.refs
    FROM chosen c JOIN moved USING (id)
)""",
    **_TABLES,
)

#: The moves made, as the chain's statements return them.
MOVED_SELECT = "SELECT c.id AS device_id, c.from_state, c.to_state, c.cause FROM chosen c JOIN moved USING (id)"

#: The moves, one per device, as `jsonb_to_recordset` reads `move_payload`.
WANTED_RECORDSET = """jsonb_to_recordset(%(moves)s::jsonb)
        AS m(device uuid, to_state varchar, cause varchar, sources text, reason text, refs jsonb)"""

#: One statement: lock, compare-and-set, history.
MOVE = Statement(
    "lifecycle.move",
    _sql(
        "WITH wanted AS (SELECT * FROM {wanted}), {chain}\n{moved} ORDER BY c.id\n",
        wanted=WANTED_RECORDSET,
        chain=MOVE_CHAIN,
        moved=MOVED_SELECT,
    ),
    Moved,
    example=lambda: {
        "moves": "[]",
        "now": timezone.now(),
        "actor": SYSTEM,
        "issued": TransitionCause.CERTIFICATE_ISSUED.value,
    },
)


def move_parameters(moves: Sequence[AutomaticMove], now: datetime) -> dict[str, Any]:
    """The parameters `MOVE_CHAIN` and `WANTED_RECORDSET` take (one move per device: the last one
    given wins, as a page decides each device once)."""
    unique = list({m.device_id: m for m in moves}.values())
    return {
        "moves": recordset(
            {
                "device": str(m.device_id),
                "to_state": m.to.value,
                "cause": m.cause.value,
                "sources": sources(m.to, m.cause),
                "reason": m.reason,
                "refs": _json_refs(m.refs),
            }
            for m in unique
        ),
        "now": now,
        "actor": SYSTEM,
        "issued": TransitionCause.CERTIFICATE_ISSUED.value,
    }


def sources(to: DeviceState, cause: TransitionCause) -> str:
    """The states an automatic move to `to` for `cause` starts from, as the chain reads them."""
    return ",".join(sorted(s.value for s in rules.automatic_sources(to, cause)))


def automatic_moves_apply(moves: Sequence[AutomaticMove], *, now: datetime | None = None) -> list[Moved]:
    """Apply the evidence's moves in the caller's transaction (one statement; none when there are
    none). Returns the moves made; a device no longer in a state the table allows is left alone."""
    if not moves:
        return []
    with connection.cursor() as cursor:
        made = MOVE.rows(cursor, move_parameters(moves, now or timezone.now()))
    metrics.transitions_counted(m.cause for m in made)
    return made


# --- automatic moves to repair, behind the circuit breaker ----------------------------------------


class Scope(NamedTuple):
    site_id: UUID
    resource_class: str


LOCK_DEVICES = Statement(
    "lifecycle.lock_devices",
    _sql(
        """
SELECT d.site_id, d.resource_class FROM {device} d
WHERE d.id = ANY(string_to_array(%(devices)s, ',')::uuid[]) ORDER BY d.id FOR NO KEY UPDATE
""",
        **_TABLES,
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
    """
SELECT count(pg_advisory_xact_lock(hashtextextended(k, 0))) AS locked
FROM (SELECT unnest(%(keys)s::text[]) AS k ORDER BY 1) keys
""",
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
    breaker_open: bool


BREAKER_FACTS = Statement(
    "lifecycle.breaker_facts",
    _sql(
        """
SELECT d.id AS device_id, d.hostname, d.site_id, s.slug AS site_slug, d.resource_class, d.state,
       pol.breaker_share, pol.breaker_window,
       (SELECT count(*) FROM {device} e
        WHERE e.site_id = d.site_id AND e.resource_class = d.resource_class AND {enrolled}) AS enrolled,
       (SELECT count(*) FROM {change} h JOIN {device} e ON e.id = h.device_id
        WHERE h.to_state = %(needs_repair)s AND NOT h.held AND h.cause = ANY(%(guarded)s)
          AND h.at > %(now)s - COALESCE(pol.breaker_window, %(window)s)
          AND e.site_id = d.site_id AND e.resource_class = d.resource_class) AS recent,
       EXISTS (SELECT 1 FROM {breaker} b
               WHERE b.site_id = d.site_id AND b.resource_class = d.resource_class AND b.closed_at IS NULL)
           AS breaker_open
FROM {device} d
JOIN {site} s ON s.id = d.site_id
LEFT JOIN {policy} pol ON pol.resource_class = d.resource_class
WHERE d.id = ANY(string_to_array(%(devices)s, ',')::uuid[])
ORDER BY d.id
""",
        enrolled=enrolled_sql("e"),
        **_TABLES,
    ),
    BreakerFacts,
    example=lambda: {
        "devices": "",
        "needs_repair": DeviceState.NEEDS_REPAIR.value,
        "guarded": sorted(c.value for c in rules.GUARDED_CAUSES),
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
                    "needs_repair": DeviceState.NEEDS_REPAIR.value,
                    "guarded": sorted(c.value for c in rules.GUARDED_CAUSES),
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
        by_scope.setdefault(Scope(fact.site_id, fact.resource_class), []).append(move)
    admitted: list[AutomaticMove] = []
    held: list[AutomaticMove] = []
    opened: list[Breaker] = []
    for scope, wanted in sorted(by_scope.items()):
        first = facts[wanted[0].device_id]
        share = first.breaker_share if first.breaker_share is not None else rules.BREAKER_SHARE
        decision = rules.breaker_decide(
            wanted=len(wanted),
            recent=first.recent,
            enrolled=first.enrolled,
            is_open=first.breaker_open,
            share=share,
            minimum=rules.BREAKER_MINIMUM,
        )
        admitted += wanted[: decision.admitted]
        held += wanted[decision.admitted :]
        if decision.trips:
            window = first.breaker_window or rules.BREAKER_WINDOW
            opened.append(
                Breaker(
                    site_id=scope.site_id,
                    resource_class=scope.resource_class,
                    opened_at=now,
                    detail=(
                        f"{first.recent + len(wanted)} of {first.enrolled} {scope.resource_class} devices at "
                        f"{first.site_slug} would go to repair within {_duration(window)} — suspect the test or the "
                        "policy before the hardware."
                    ),
                )
            )
    moved = automatic_moves_apply(admitted, now=now)
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
                    refs=_json_refs(m.refs) | {"held_cause": m.cause.value},
                )
                for m in held
            ]
        )
        metrics.transitions_counted(TransitionCause.HELD_BY_BREAKER for _ in held)
    if opened:
        Breaker.objects.bulk_create(opened, ignore_conflicts=True)
    return Guarded(moved, held, opened)


def _duration(window: timedelta) -> str:
    minutes = int(window.total_seconds() // 60)
    return f"{minutes // 60} h" if minutes % 60 == 0 and minutes >= 60 else f"{minutes} min"


def _json_refs(refs: Mapping[str, Any]) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(json.dumps(dict(refs), default=str))
    return loaded
