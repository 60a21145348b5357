"""Every change of a device's lifecycle state goes through here: the table of `fleet_rules.lifecycle`
is checked, the device and a history entry are written in the same transaction, and the change is
counted. A refused change is a 409 naming the rule.

Two ways in: `device_transition` for one device moved by a person, the fleet file or a repair
(locks the device, checks, writes); `automatic_moves_apply` for the moves the evidence causes on a
reconcile page (one statement for the whole page: lock, compare-and-set on the expected states,
history), so the page sends a constant number of statements whatever it moves.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, NamedTuple
from uuid import UUID

from django.db import connection, transaction
from django.utils import timezone

from fleet.core.exceptions import Conflict, FleetError
from fleet.core.rows import recordset
from fleet.core.statements import Statement
from fleet.inventory.models import Device
from fleet.lifecycle import metrics
from fleet.lifecycle.models import DeviceStateChange
from fleet.policies.models import AcceptancePolicy
from fleet_rules import lifecycle as rules
from fleet_rules.vocabulary import DeviceState, Mover, TransitionCause

SYSTEM = Mover.SYSTEM.value
_TABLES = {
    "device": Device._meta.db_table,
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
    device = Device.objects.select_for_update().get(id=device_id)
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


#: Lock the devices (primary-key order, as every other writer of devices), move those in a state the
#: table allows for their cause (and, for an issued certificate, only where the policy auto-accepts),
#: and write their history: one statement.
MOVE = Statement(
    "lifecycle.move",
    _sql(
        """
WITH wanted AS (
    SELECT * FROM jsonb_to_recordset(%(moves)s::jsonb)
        AS m(device uuid, to_state varchar, cause varchar, sources text, reason text, refs jsonb)
), locked AS (
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
)
SELECT c.id AS device_id, c.from_state, c.to_state, c.cause FROM chosen c JOIN moved USING (id) ORDER BY c.id
""",
        **_TABLES,
    ),
    Moved,
    example=lambda: {
        "moves": "[]",
        "now": timezone.now(),
        "actor": SYSTEM,
        "issued": TransitionCause.CERTIFICATE_ISSUED.value,
    },
)


def _sources(move: AutomaticMove) -> str:
    (found,) = [r for r in rules.TRANSITIONS if r.to == move.to and move.cause in r.causes]
    return ",".join(sorted(s.value for s in found.sources))


def automatic_moves_apply(moves: Sequence[AutomaticMove], *, now: datetime | None = None) -> list[Moved]:
    """Apply the evidence's moves in the caller's transaction (one statement; none when there are
    none). Returns the moves made; a device no longer in a state the table allows is left alone."""
    # One move per device: the last one given wins (a page decides each device once).
    moves = list({m.device_id: m for m in moves}.values())
    if not moves:
        return []
    now = now or timezone.now()
    payload = recordset(
        {
            "device": str(m.device_id),
            "to_state": m.to.value,
            "cause": m.cause.value,
            "sources": _sources(m),
            "reason": m.reason,
            "refs": json.loads(json.dumps(dict(m.refs), default=str)),
        }
        for m in moves
    )
    with connection.cursor() as cursor:
        made = MOVE.rows(
            cursor,
            {"moves": payload, "now": now, "actor": SYSTEM, "issued": TransitionCause.CERTIFICATE_ISSUED.value},
        )
    metrics.transitions_counted(m.cause for m in made)
    return made
