"""One supersession: a certificate stops being its device's current one, with why
(`SupersedeReason`), and for the reasons that lift (`fleet_rules.certificates.LIFTING_REASONS`: the
certificate no longer holds, it was not renewed) its accepted device goes back to burn-in through
the lifecycle's writer (`fleet.lifecycle.services.transitions_apply`). A device in service stays in
service (the table moves only accepted devices), counted as in service uncertified.

Its callers: certificate issuance (failed, errored, expired, policy_changed, renewed: it runs
`supersede_run` and folds `lifts` into its issue statement, so a reconcile page pays no statement
more) and fingerprints (hardware_changed: `certificates_supersede`, two statements whatever the
batch).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, NamedTuple
from uuid import UUID

from django.db import connection
from django.utils import timezone

from fleet.burnin.models import AcceptanceCertificate
from fleet.burnin.tables import sql
from fleet.core.locks import scope_locks_sql
from fleet.core.statements import Cursor, Statement
from fleet.events.outbox import device_events_sql
from fleet.inventory.models import Site
from fleet.lifecycle.services import Applied, AutomaticMove, transitions_apply
from fleet_rules.certificates import LIFTING_REASONS
from fleet_rules.vocabulary import DeviceState, EventType, SupersedeReason, TransitionCause


@dataclass(frozen=True)
class Supersession:
    """A device's current certificate to supersede: why (`reason`), what to add to the history
    entry's reason (`detail`: what changed in words) and its ids (`refs`: the new fingerprint)."""

    device_id: UUID
    serial: UUID
    reason: SupersedeReason
    detail: str = ""
    refs: Mapping[str, Any] = field(default_factory=dict)


class Serialized(NamedTuple):
    """How many scopes' acceptance locks the statement took (`acceptance_key`)."""

    locked: int


def acceptance_key(site_id: UUID, resource_class: str) -> str:
    """The advisory lock of a (site, resource class)'s acceptance (`fleet.core.locks`, third rank)."""
    return f"acceptance|{site_id}|{resource_class}"


#: Also takes the acceptance locks of the classes the caller is about to issue certificates in
#: (`%(classes)s`): pages issuing in one class run their issue statement one after the other, each
#: seeing what the one before committed, so exactly one of them sees its class complete
#: (`fleet.burnin.certificates.issuance`, event `class.accepted`) — in a statement every page sends
#: already, so a page pays no statement more.
SUPERSEDE = Statement(
    "burnin.supersession.supersede",
    sql(
        """
WITH serialized AS (
    {serialized}
), superseded AS (
    UPDATE {certificate} c SET superseded_at = %(now)s, supersede_reason = u.reason
    FROM unnest(%(serials)s::uuid[], %(reasons)s::varchar[]) AS u(serial, reason)
    WHERE c.serial = u.serial AND c.superseded_at IS NULL
    RETURNING c.serial, c.device_id, c.supersede_reason
), superseded_events AS (
    {superseded_events}
)
SELECT locked FROM serialized
""",
        serialized=scope_locks_sql("%(classes)s::text[]"),
        certificate=AcceptanceCertificate._meta.db_table,
        # Each certificate superseded is an event, in this statement (a reconcile page pays no statement more).
        superseded_events=device_events_sql(
            sql(
                """(SELECT x.device_id, d.hostname, d.site_id, s.slug AS site_slug, d.resource_class,
           '{event_type}' AS event_type,
           jsonb_build_object('certificate', x.serial::text, 'reason', x.supersede_reason) AS data
    FROM superseded x JOIN {device} d ON d.id = x.device_id JOIN {site} s ON s.id = d.site_id) e""",
                event_type=EventType.CERTIFICATE_SUPERSEDED.value,
                site=Site._meta.db_table,
            )
        ),
    ),
    Serialized,
    example=lambda: {
        "now": timezone.now(),
        "serials": [uuid.uuid4()],
        "reasons": [SupersedeReason.FAILED.value],
        "classes": [acceptance_key(uuid.uuid4(), "gpu")],
    },
)


def supersede_run(
    cursor: Cursor,
    supersessions: Sequence[Supersession],
    now: datetime,
    *,
    issuing_in: Iterable[tuple[UUID, str]] = (),
) -> None:
    """Supersede these certificates (one statement, also when there are none: a reconcile page
    sends the same statements whatever it found); a certificate already superseded stays as it was.
    `issuing_in`: the (site, resource class) scopes the caller issues certificates in next, whose
    acceptance locks the statement takes (held until the transaction ends)."""
    SUPERSEDE.rows(
        cursor,
        {
            "now": now,
            "serials": [s.serial for s in supersessions],
            "reasons": [s.reason.value for s in supersessions],
            "classes": sorted({acceptance_key(site, rc) for site, rc in issuing_in}),
        },
    )


def lifts(supersessions: Sequence[Supersession]) -> list[AutomaticMove]:
    """The lifecycle's moves these supersessions make: accepted → burn-in, for the reasons that lift."""
    return [
        AutomaticMove(
            s.device_id,
            DeviceState.BURN_IN,
            TransitionCause.CERTIFICATE_SUPERSEDED,
            f"certificate {s.serial} superseded: {s.reason.value}" + (f" ({s.detail})" if s.detail else ""),
            {"certificate": str(s.serial), "supersede_reason": s.reason.value, **s.refs},
        )
        for s in supersessions
        if s.reason in LIFTING_REASONS
    ]


def certificates_supersede(supersessions: Sequence[Supersession], *, now: datetime) -> Applied:
    """Supersede these certificates and lift their devices, in the caller's transaction: two
    statements whatever their number (none when there are none)."""
    if not supersessions:
        return Applied()
    with connection.cursor() as cursor:
        supersede_run(cursor, supersessions, now)
    return transitions_apply([m.requested() for m in lifts(supersessions)], now=now)
