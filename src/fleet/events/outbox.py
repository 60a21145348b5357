"""Writing events: the outbox insert a writer composes into its own statement (`device_events_sql`:
the lifecycle's chain, certificate issuance and supersession pay no statement more per reconcile
page), and `events_record` for writers that write through the ORM (repairs, breakers, isolation):
one statement whatever the batch, in the caller's transaction. Either way the event commits or
rolls back with its change.

Links in `data.links` are paths (`/sites/…/devices/…/`); a delivery makes them absolute with
`FLEET_PUBLIC_URL` (`fleet.events.cloudevents`), so a stored event does not go stale when the
service moves."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, NamedTuple
from uuid import UUID

from fleet.events.models import Event
from fleet.inventory.models import Device
from fleet_rules.vocabulary import DEVICE_EVENT_PREFIX, EventType

EVENT_TABLE = Event._meta.db_table

#: Where a device's page and its evidence pack are, as paths of the service.
DEVICE_PAGE = "/sites/{site}/devices/{hostname}/"
EVIDENCE_PACK = "/api/v1/devices/{device_id}/evidence-pack/"
BREAKER_PAGE = "/sites/{site}/repairs/"
SITE_PAGE = "/sites/{site}/"


def device_subject(site: str, hostname: str) -> str:
    return f"sites/{site}/devices/{hostname}"


def device_links(*, site: str, hostname: str, device_id: UUID | str) -> dict[str, str]:
    """The links of an event about a device (its page, its evidence pack)."""
    return {
        "dashboard": DEVICE_PAGE.format(site=site, hostname=hostname),
        "evidence_pack": EVIDENCE_PACK.format(device_id=device_id),
    }


def _sql_template(template: str, **columns: str) -> str:
    """A path template as SQL concatenation of the named columns (constants only)."""
    parts: list[str] = []
    rest = template
    while "{" in rest:
        head, _, tail = rest.partition("{")
        name, _, rest = tail.partition("}")
        parts += [f"'{head}'", f"{columns[name]}::text"]
    parts.append(f"'{rest}'")
    return " || ".join(p for p in parts if p != "''")


class DeviceEventSource(NamedTuple):
    """The columns a statement's device rows give `device_events_sql` (by these names)."""

    device_id: UUID
    hostname: str
    site_id: UUID
    site_slug: str
    resource_class: str
    event_type: str
    data: Any  # jsonb: what the writer adds (states, cause, reason, refs, certificate …)


def device_events_sql(source: str, *, now: str = "%(now)s") -> str:
    """`INSERT INTO` the outbox one event per row of `source` (a FROM item with
    `DeviceEventSource`'s columns, aliased `e`): subject, site, and `data` = the device's ids,
    hostname, site, class and links, merged with the row's own `data`. For a CTE."""
    links = (
        f"jsonb_build_object('dashboard', {_sql_template(DEVICE_PAGE, site='e.site_slug', hostname='e.hostname')}, "
        f"'evidence_pack', {_sql_template(EVIDENCE_PACK, device_id='e.device_id')})"
    )
    return _DEVICE_EVENTS.format(
        table=EVENT_TABLE,
        subject=_sql_template("sites/{site}/devices/{hostname}", site="e.site_slug", hostname="e.hostname"),
        now=now,
        links=links,
        source=source,
    )


_DEVICE_EVENTS = """INSERT INTO {table} (id, type, subject, time, site_id, data, fanned_out)
    SELECT gen_random_uuid(), e.event_type, {subject}, {now}, e.site_id,
           jsonb_build_object('device_id', e.device_id::text, 'hostname', e.hostname, 'site', e.site_slug,
                              'resource_class', e.resource_class, 'links', {links}) || e.data, false
    FROM {source}"""


class ClassEventSource(NamedTuple):
    """The columns a statement's (site, resource class) rows give `class_events_sql`."""

    site_id: UUID
    site_slug: str
    resource_class: str
    event_type: str
    data: Any  # jsonb: what the writer adds (the class's device count …)


def class_subject(site: str, resource_class: str) -> str:
    return f"sites/{site}/classes/{resource_class}"


def class_events_sql(source: str, *, now: str = "%(now)s") -> str:
    """`INSERT INTO` the outbox one event per row of `source` (a FROM item with
    `ClassEventSource`'s columns, aliased `e`): subject `sites/<slug>/classes/<class>`, `data` = the
    site, the class and a link to the site's page, merged with the row's own `data`. For a CTE."""
    return _CLASS_EVENTS.format(
        table=EVENT_TABLE,
        subject=_sql_template("sites/{site}/classes/{rc}", site="e.site_slug", rc="e.resource_class"),
        now=now,
        links=f"jsonb_build_object('dashboard', {_sql_template(SITE_PAGE, site='e.site_slug')})",
        source=source,
    )


_CLASS_EVENTS = """INSERT INTO {table} (id, type, subject, time, site_id, data, fanned_out)
    SELECT gen_random_uuid(), e.event_type, {subject}, {now}, e.site_id,
           jsonb_build_object('site', e.site_slug, 'resource_class', e.resource_class, 'links', {links})
           || e.data, false
    FROM {source}"""


#: A device state change's event type, in SQL, from the state column named.
def device_state_type_sql(state: str) -> str:
    return f"'{DEVICE_EVENT_PREFIX}' || {state}"


def device_state_type(state: str) -> EventType:
    return EventType(DEVICE_EVENT_PREFIX + state)


@dataclass(frozen=True)
class Draft:
    """An event a writer records through `events_record`."""

    type: EventType
    subject: str
    site_id: UUID | None
    data: Mapping[str, Any] = field(default_factory=dict)


def device_draft(
    kind: EventType, device: Device, data: Mapping[str, Any], *, links: Mapping[str, str] | None = None
) -> Draft:
    """An event about a device for `events_record`, with the same device part as the statements'
    events (`device_events_sql`): its ids, hostname, site, class and links, then the writer's own
    `data` (and links beside the device's). `device.site` is read: select it with the device."""
    site = device.site.slug
    return Draft(
        kind,
        device_subject(site, device.hostname),
        device.site_id,
        {
            "device_id": str(device.id),
            "hostname": device.hostname,
            "site": site,
            "resource_class": device.resource_class,
            **data,
            "links": device_links(site=site, hostname=device.hostname, device_id=device.id) | dict(links or {}),
        },
    )


def events_record(drafts: Sequence[Draft], *, now: datetime) -> None:
    """Insert these events in the caller's transaction: one statement, none when there are none."""
    if drafts:
        Event.objects.bulk_create(
            [Event(type=d.type, subject=d.subject, time=now, site_id=d.site_id, data=dict(d.data)) for d in drafts]
        )
