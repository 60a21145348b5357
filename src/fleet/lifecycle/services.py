"""The one writer of device state: every change of a device's lifecycle state goes through
`transitions_apply`. It locks the devices (primary-key order, `fleet.core.locks`), checks the table
of `fleet_rules.lifecycle`, compare-and-sets the state (a device no longer where the table, or the
caller, expects it stays where it is and the move is refused, with why), writes the history entry
and counts the change — in the caller's transaction, in one statement whatever the batch.

Everything that moves devices calls it: an operator's transition (`device_move`, through the
acceptance gate), the fleet file (its state changes and `--prune`'s decommissioning), a repair,
certificate issuance and supersession (a reconcile page composes `TRANSITIONS_CHAIN` into its issue
statement, so the page pays no statement more), a fatal Xid, culprit isolation and failing too often
(behind the circuit breaker: `fleet.lifecycle.breakers`). A refused change asked for by a person
is a 409 naming the rule.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, NamedTuple
from uuid import UUID

from django.db import connection, transaction
from django.utils import timezone

from fleet.core.exceptions import Conflict, FleetError, NotFoundError
from fleet.core.locks import locked_sql
from fleet.core.rows import recordset
from fleet.core.statements import Statement, select_list
from fleet.events.outbox import device_events_sql, device_state_type_sql
from fleet.inventory.models import Device, Site
from fleet.lifecycle import metrics
from fleet.lifecycle.models import Breaker, DeviceStateChange, Repair
from fleet.policies.models import AcceptancePolicy
from fleet_rules import lifecycle as rules
from fleet_rules.vocabulary import DeviceState, Mover, TransitionCause

SYSTEM = Mover.SYSTEM.value
TABLES = {
    "device": Device._meta.db_table,
    "site": Site._meta.db_table,
    "breaker": Breaker._meta.db_table,
    "change": DeviceStateChange._meta.db_table,
    "policy": AcceptancePolicy._meta.db_table,
    "repair": Repair._meta.db_table,
}


def sql(template: str, **tables: str) -> str:
    """A SQL template with table names filled in (constants only; values travel as parameters)."""
    return template.format(**tables)


# --- what is asked, and what became of it -----------------------------------------------------------


@dataclass(frozen=True)
class Move:
    """One requested change of a device's state: by whom (`mover`: the service, an operator, the
    fleet file) and why (`cause`, `reason`, the ids in `refs`), who is accountable (`actor`).

    `expected`: the state the caller read the device in; the move is refused when it is elsewhere
    by the time it is locked (compare-and-set against a concurrent writer). `certified`: a move a
    person or the fleet file makes into an accepted state holds a valid certificate; `forced`: it
    is made without one (needs a reason; its history entry is marked `forced`)."""

    device_id: UUID
    to: DeviceState
    mover: Mover
    cause: TransitionCause
    actor: str = SYSTEM
    reason: str = ""
    refs: Mapping[str, Any] = field(default_factory=dict)
    expected: DeviceState | None = None
    certified: bool = False
    forced: bool = False

    def sources(self) -> frozenset[DeviceState]:
        """The states the device may be in, locked, for this move to be made."""
        allowed = rules.allowed_sources(self.to, self.mover, self.cause, certified=self.certified or self.forced)
        return allowed & {DeviceState(self.expected)} if self.expected is not None else allowed


@dataclass(frozen=True)
class AutomaticMove:
    """A move the evidence causes: to `to`, for `cause`, from whichever of the table's states the
    device is in when the statement locks it (in any other state it stays: compare-and-set)."""

    device_id: UUID
    to: DeviceState
    cause: TransitionCause
    reason: str = ""
    refs: Mapping[str, Any] = field(default_factory=dict)

    def requested(self) -> Move:
        return Move(self.device_id, self.to, Mover.SYSTEM, self.cause, SYSTEM, self.reason, self.refs)


class Moved(NamedTuple):
    device_id: UUID
    from_state: str
    to_state: str
    cause: str


@dataclass(frozen=True)
class Refused:
    """A move not made: the device as it was locked (`state` None: no such device) and why, in a
    sentence that names it."""

    device_id: UUID
    hostname: str
    state: str | None
    to: str
    why: str


@dataclass(frozen=True)
class Applied:
    """What `transitions_apply` did: the moves made (with their history entries, by device) and
    the ones refused."""

    moved: list[Moved] = field(default_factory=list)
    refused: list[Refused] = field(default_factory=list)
    changes: dict[UUID, UUID] = field(default_factory=dict)


# --- the statement ----------------------------------------------------------------------------------


class Wanted(NamedTuple):
    """A requested move as the statement reads it (the `wanted` CTE's columns): the states it may
    start from as comma-separated text."""

    device: UUID
    to_state: str
    cause: str
    sources: str
    reason: str
    refs: Any
    actor: str


_WANTED_TYPES = {
    "device": "uuid",
    "to_state": "varchar",
    "cause": "varchar",
    "sources": "text",
    "reason": "text",
    "refs": "jsonb",
    "actor": "varchar",
}
assert tuple(_WANTED_TYPES) == Wanted._fields

#: The moves asked from Python, one row per device, as `transitions_parameters` binds them.
WANTED_MOVES = sql(
    "SELECT {columns} FROM jsonb_to_recordset(%(moves)s::jsonb) AS m({types})",
    columns=select_list(Wanted, {f: f"m.{f}" for f in Wanted._fields}),
    types=", ".join(f"{name} {kind}" for name, kind in _WANTED_TYPES.items()),
)


def wanted_columns(expressions: Mapping[str, str]) -> str:
    """A select list of `Wanted`'s columns, in its order: for a statement that makes moves of its own
    rows (certificate issuance accepts the devices it issued to)."""
    return select_list(Wanted, expressions)


class Outcome(NamedTuple):
    """Each wanted move after the statement: the device as locked (null: no such device) and, when
    it moved, its history entry."""

    device_id: UUID
    hostname: str | None
    state: str | None
    to_state: str
    cause: str
    change_id: UUID | None


#: After a `wanted` CTE (`Wanted`'s columns, one row per device): lock the devices (primary-key
#: order, `fleet.core.locks`), move those whose locked state is one the move may start from (and,
#: for an issued certificate, only where the policy accepts automatically), write their history, and
#: say in `outcome` what became of each wanted move. `TRANSITIONS_APPLY` is this alone; certificate
#: issuance composes it into its own insert, so a reconcile page's moves cost it no statement.
TRANSITIONS_CHAIN = sql(
    """
locked AS (
    {locked}
), chosen AS (
    SELECT l.id, l.state AS from_state, w.to_state, w.cause, w.reason, w.refs, w.actor FROM locked l
    JOIN wanted w ON w.device = l.id
    WHERE l.state = ANY(string_to_array(w.sources, ','))
      AND (w.cause <> %(issued)s OR EXISTS (
          SELECT 1 FROM {policy} p WHERE p.resource_class = l.resource_class AND p.auto_accept))
), moved AS (
    UPDATE {device} d SET state = c.to_state, updated_at = %(now)s FROM chosen c WHERE d.id = c.id
    RETURNING d.id
), history AS (
    INSERT INTO {change} (id, device_id, from_state, to_state, at, actor, cause, held, reason, refs)
    SELECT gen_random_uuid(), c.id, c.from_state, c.to_state, %(now)s, c.actor, c.cause, false, c.reason, c.refs
    FROM chosen c JOIN moved USING (id)
    RETURNING id, device_id
), outboxed AS (
    {outbox}
), outcome AS (
    SELECT {outcome} FROM wanted w
    LEFT JOIN locked l ON l.id = w.device
    LEFT JOIN history h ON h.device_id = w.device
)""",
    locked=locked_sql(
        TABLES["device"],
        "d",
        "d.id, d.hostname, d.state, d.resource_class, d.site_id",
        "d.id IN (SELECT device FROM wanted)",
    ),
    # Every move made is an event, in this statement: it commits exactly when the move does.
    outbox=device_events_sql(
        sql(
            """(SELECT c.id AS device_id, l.hostname, l.site_id, s.slug AS site_slug, l.resource_class,
           {event_type} AS event_type,
           jsonb_build_object('from_state', c.from_state, 'to_state', c.to_state, 'cause', c.cause,
                              'reason', c.reason, 'refs', c.refs, 'actor', c.actor, 'change_id', h.id::text) AS data
    FROM chosen c JOIN history h ON h.device_id = c.id JOIN locked l ON l.id = c.id
    JOIN {site} s ON s.id = l.site_id) e""",
            event_type=device_state_type_sql("c.to_state"),
            **TABLES,
        )
    ),
    outcome=select_list(
        Outcome,
        {
            "device_id": "w.device",
            "hostname": "l.hostname",
            "state": "l.state",
            "to_state": "w.to_state",
            "cause": "w.cause",
            "change_id": "h.id",
        },
    ),
    **TABLES,
)

#: `outcome`'s columns, for the statements that end the chain.
OUTCOME_COLUMNS = ", ".join(f"o.{name}" for name in Outcome._fields)

#: One statement: lock, check, compare-and-set, history.
TRANSITIONS_APPLY = Statement(
    "lifecycle.transitions_apply",
    sql(
        "WITH wanted AS ({wanted}), {chain}\nSELECT {outcome} FROM outcome o ORDER BY o.device_id\n",
        wanted=WANTED_MOVES,
        chain=TRANSITIONS_CHAIN,
        outcome=OUTCOME_COLUMNS,
    ),
    Outcome,
    example=lambda: transitions_parameters([], timezone.now()),
)


def sources_text(sources: Iterable[DeviceState]) -> str:
    """States as the chain reads them (`string_to_array(…, ',')`)."""
    return ",".join(sorted(s.value for s in sources))


def transitions_parameters(moves: Sequence[Move], now: datetime) -> dict[str, Any]:
    """The parameters `TRANSITIONS_CHAIN` and `WANTED_MOVES` take (one move per device: the last
    one given wins, as a page decides each device once). A forced move without a reason is a 400,
    before anything is written."""
    unique = list({m.device_id: m for m in moves}.values())
    for move in unique:
        if move.forced and not move.reason.strip():
            raise FleetError("A forced change needs a reason.", field_errors={"reason": ["Say why (it is recorded)."]})
    return {
        "moves": recordset(
            {
                "device": str(m.device_id),
                "to_state": m.to.value,
                "cause": m.cause.value,
                "sources": sources_text(m.sources()),
                "reason": m.reason.strip(),
                "refs": json_refs(m.refs) | ({"forced": True} if m.forced and not m.certified else {}),
                "actor": m.actor,
            }
            for m in unique
        ),
        "now": now,
        "issued": TransitionCause.CERTIFICATE_ISSUED.value,
    }


def transitions_outcome(moves: Sequence[Move], outcomes: Iterable[Outcome]) -> Applied:
    """What the chain's `outcome` says, as `Applied` (each refusal explained by the table), and the
    moves made counted when the transaction commits. For a statement that composes the chain."""
    asked = {m.device_id: m for m in moves}
    applied = Applied()
    for row in outcomes:
        if row.change_id is not None and row.state is not None:
            applied.moved.append(Moved(row.device_id, row.state, row.to_state, row.cause))
            applied.changes[row.device_id] = row.change_id
        else:
            move = asked.get(row.device_id) or Move(
                row.device_id, DeviceState(row.to_state), Mover.SYSTEM, TransitionCause(row.cause)
            )
            applied.refused.append(Refused(row.device_id, row.hostname or "", row.state, row.to_state, _why(move, row)))
    metrics.transitions_counted(m.cause for m in applied.moved)
    return applied


def _why(move: Move, row: Outcome) -> str:
    """Why the chain left this device where it was, in the words of the rule that refused it."""
    if row.state is None:
        return f"No device {row.device_id}."
    if move.expected is not None and row.state != move.expected:
        return (
            f"{row.hostname} is {row.state} now, not {DeviceState(move.expected).value}: another change moved it "
            "meanwhile (read it again, then decide)."
        )
    refused = rules.refusal(row.state, move.to, move.mover, move.cause)
    if refused is not None:
        return f"{row.hostname}: {refused}"
    if rules.needs_certificate(row.state, move.to, move.mover) and not (move.certified or move.forced):
        return (
            f"{row.hostname} holds no valid acceptance certificate, so it cannot move to {move.to.value}: let burn-in "
            "finish, or force with a reason (recorded)."
        )
    if move.cause == TransitionCause.CERTIFICATE_ISSUED:
        return f"{row.hostname}: its policy does not accept devices automatically (auto_accept is off)."
    return f"{row.hostname}: not moved to {move.to.value}."


def transitions_apply(moves: Sequence[Move], *, now: datetime | None = None) -> Applied:
    """Make these moves in the caller's transaction: one statement whatever their number (none
    when there are none). Returns what moved and what was refused, and why; refusing is the
    caller's to report (a person's move raises, the evidence's are left)."""
    if not moves:
        return Applied()
    params = transitions_parameters(moves, now or timezone.now())
    with connection.cursor() as cursor:
        outcomes = TRANSITIONS_APPLY.rows(cursor, params)
    return transitions_outcome(moves, outcomes)


def automatic_moves_apply(moves: Sequence[AutomaticMove], *, now: datetime | None = None) -> list[Moved]:
    """The evidence's moves (`transitions_apply` by the service): the moves made; a device no
    longer in a state the table allows is left alone."""
    return transitions_apply([m.requested() for m in moves], now=now).moved


# --- one device, moved by a person, the fleet file or a repair ---------------------------------------


@dataclass(frozen=True)
class Changed:
    """What a transition did: the device as it now is, and its history entry."""

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
    expected: DeviceState | None = None,
) -> Changed:
    """Move one device to `to` if the table lets `mover` do it (`transitions_apply` of one): a 409
    naming the rule when refused, a 404 for no such device. A move into an accepted state by a
    person or the fleet file needs `certified`, or `force` with a reason."""
    move = Move(
        device_id,
        to,
        mover,
        cause or _person_cause(mover),
        actor,
        reason,
        refs or {},
        expected=expected,
        certified=certified,
        forced=force and not certified,
    )
    applied = transitions_apply([move])
    for refused in applied.refused:
        if refused.state is None:
            raise NotFoundError(refused.why)
        raise Conflict(refused.why)
    device = Device.objects.get(id=device_id)
    return Changed(device, DeviceStateChange.objects.get(id=applied.changes[device_id]))


def _person_cause(mover: Mover) -> TransitionCause:
    if mover == Mover.FLEET_FILE:
        return TransitionCause.FLEET_FILE
    if mover == Mover.OPERATOR:
        return TransitionCause.OPERATOR
    raise ValueError("an automatic move names its cause")


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
    needs the device's valid certificate, or force with a reason (the override is recorded). The
    certificate is asked about the state read here, and the move compare-and-sets that state: a
    device another change moved meanwhile is a 409, not a move decided on what it was."""
    gate = acceptance_gate()
    state = Device.objects.filter(id=device_id).values_list("state", flat=True).first()
    if state is None:
        raise NotFoundError(f"No device {device_id}.")
    gated = rules.needs_certificate(state, to, Mover.OPERATOR)
    certified = not (gated and gate.uncertified([device_id]))
    changed = device_transition(
        device_id=device_id,
        to=to,
        mover=Mover.OPERATOR,
        actor=actor,
        reason=reason,
        certified=certified,
        force=force,
        expected=DeviceState(state),
    )
    override = None
    if not certified:
        override = gate.override_record(device_id=device_id, actor=actor, reason=reason.strip())
    return OperatorMoved(changed.device, changed.change, override)


def json_refs(refs: Mapping[str, Any]) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(json.dumps(dict(refs), default=str))
    return loaded
