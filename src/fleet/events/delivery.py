"""The delivery worker (`fleet deliver`): fan events out to their subscriptions, lease the
deliveries that are due, send them signed (Standard Webhooks), record what the receivers said.

Several workers may run: fan-out and leasing take their rows as a queue's
(`fleet.core.locks.queue_rows_sql`: locked rows skipped), so two never take the same event or
delivery at once. A delivery is leased for `lease` seconds; a worker killed while
sending leaves the lease to lapse and another (or the next) worker sends it again, with the same
`webhook-id` (at least once: receivers deduplicate by it). A failed try is retried with
exponential backoff and jitter (`fleet_rules.webhooks.next_try`) for the subscription's retry
window; then the delivery is `failed` and the subscription `failing_since` (the alert
`FleetWebhookSubscriptionFailing`) until a delivery to it succeeds again.

Each pass is three statements whatever the batch: fan-out, lease, and the outcomes' update (one
`jsonb_to_recordset`), plus the subscriptions' failing mark. Deliveries of one subscription and
subject go out in the events' order (`IN_ORDER`). Every `prune_every` seconds the worker deletes
delivered events and delivery logs older than the retention, in bounded batches (`prune`)."""

from __future__ import annotations

import logging
import threading
import time as clock
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, NamedTuple
from uuid import UUID

import httpx
from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone

from fleet.core.locks import queue_rows_sql, try_lock_sql
from fleet.core.rows import recordset
from fleet.core.statements import NoRow, Statement, select_list
from fleet.events import cloudevents
from fleet.events.models import Delivery, Event, Subscription
from fleet.events.targets import checked_transport, url_refusal
from fleet_rules import webhooks
from fleet_rules.vocabulary import DeliveryStatus

log = logging.getLogger("fleet.events.deliver")

#: A receiver's answer is read up to this many bytes (kept for the log: the first 500 characters).
MAX_RESPONSE_BYTES = 64 * 1024
TIMEOUT = httpx.Timeout(10.0, connect=5.0)
USER_AGENT = "fleet-burnin-webhooks/1"

TABLES = {
    "event": Event._meta.db_table,
    "delivery": Delivery._meta.db_table,
    "subscription": Subscription._meta.db_table,
}


def sql(template: str, **fragments: str) -> str:
    """A SQL template with the table names (and named fragments) filled in: constants only."""
    return template.format(**TABLES, **fragments)


class FannedOut(NamedTuple):
    events: int
    deliveries: int


#: One delivery per (matching subscription, event) for a batch of events not yet fanned out,
#: taken `SKIP LOCKED` (another worker takes the next batch), then marked fanned out.
FAN_OUT = Statement(
    "events.delivery.fan_out",
    sql(
        """
WITH batch AS (
    {batch}
), made AS (
    INSERT INTO {delivery} (id, subscription_id, event_id, status, attempts, created_at, next_attempt_at, error,
                            subject, event_time)
    SELECT gen_random_uuid(), s.id, b.id, %(scheduled)s, 0, %(now)s, %(now)s, '', b.subject, b.time
    FROM batch b JOIN {subscription} s ON s.active
        AND (cardinality(s.event_types) = 0 OR b.type = ANY(s.event_types))
        AND (s.site_id IS NULL OR s.site_id = b.site_id)
    ON CONFLICT DO NOTHING
    RETURNING 1
), marked AS (
    UPDATE {event} e SET fanned_out = true FROM batch b WHERE e.id = b.id RETURNING 1
)
SELECT (SELECT count(*) FROM marked) AS events, (SELECT count(*) FROM made) AS deliveries
""",
        batch=queue_rows_sql(
            TABLES["event"],
            "e",
            "e.id, e.type, e.site_id, e.subject, e.time",
            "NOT e.fanned_out",
            "e.time, e.id",
            "%(limit)s",
        ),
    ),
    FannedOut,
    example=lambda: {"limit": 10, "now": timezone.now(), "scheduled": DeliveryStatus.SCHEDULED.value},
)


class Leased(NamedTuple):
    """A delivery leased for sending, with what it needs: the event and the subscription."""

    delivery_id: UUID
    attempts: int
    created_at: datetime
    subscription_id: UUID
    url: str
    secret: str
    allow_private: bool
    retry_window_seconds: int
    event_id: UUID
    type: str
    subject: str
    time: datetime
    data: Any


#: Per subscription and subject, in the events' order (time, then id): a delivery is taken only
#: while no earlier one of its subscription and subject is in flight (leased) or waiting for its
#: retry, and no earlier event of its subject is still to be fanned out; the earlier ones still due
#: are taken with it, in the same lease (the batch is in the events' order), and sent one after the
#: other by one thread (`_send_chain`), which stops at the first that fails. One lease at a time
#: takes a subject's chain: the subject's transaction advisory lock is tried (`try_lock_sql`), and a
#: subject another worker is leasing is skipped. So a later event about a device never overtakes an
#: earlier one, whatever the retries and however many workers; one given up (`failed`) no longer
#: holds the later ones back. Index probes (`events_delivery_subject_idx`, `events_event_subject_idx`).
IN_ORDER = sql(
    """NOT EXISTS (
        SELECT 1 FROM {delivery} p
        WHERE p.subscription_id = d.subscription_id AND p.subject = d.subject AND p.status = %(scheduled)s
          AND (p.event_time, p.event_id) < (d.event_time, d.event_id)
          AND (p.next_attempt_at > %(now)s OR p.leased_until >= %(now)s))
    AND NOT EXISTS (
        SELECT 1 FROM {event} u WHERE NOT u.fanned_out AND u.subject = d.subject
          AND (u.time, u.id) < (d.event_time, d.event_id))
    AND {subject_lock}""",
    subject_lock=try_lock_sql("'delivery|' || d.subscription_id::text || '|' || d.subject"),
)

LEASE = Statement(
    "events.delivery.lease",
    sql(
        """
WITH due AS (
    {due}
), leased AS (
    UPDATE {delivery} d SET leased_until = %(until)s, attempts = d.attempts + 1 FROM due WHERE d.id = due.id
    RETURNING d.id, d.attempts, d.created_at, d.subscription_id, d.event_id
)
SELECT {columns} FROM leased l
JOIN {subscription} s ON s.id = l.subscription_id JOIN {event} e ON e.id = l.event_id
ORDER BY e.time, e.id
""",
        due=queue_rows_sql(
            TABLES["delivery"],
            "d",
            "d.id",
            "d.status = %(scheduled)s AND d.next_attempt_at <= %(now)s"
            " AND (d.leased_until IS NULL OR d.leased_until < %(now)s)"
            f" AND {IN_ORDER}",
            "d.event_time, d.event_id",
            "%(limit)s",
        ),
        columns=select_list(
            Leased,
            {
                "delivery_id": "l.id",
                "attempts": "l.attempts",
                "created_at": "l.created_at",
                "subscription_id": "s.id",
                "url": "s.url",
                "secret": "s.secret",
                "allow_private": "s.allow_private",
                "retry_window_seconds": "s.retry_window_seconds",
                "event_id": "e.id",
                "type": "e.type",
                "subject": "e.subject",
                "time": "e.time",
                "data": "e.data",
            },
        ),
    ),
    Leased,
    example=lambda: {
        "limit": 10,
        "now": timezone.now(),
        "until": timezone.now(),
        "scheduled": DeliveryStatus.SCHEDULED.value,
    },
)


#: What each try came to, one statement for the batch. Only a delivery still scheduled is
#: written (a redelivery or another worker's outcome is not undone by a late one). A delivery
#: leased but not tried (after an earlier one of its chain failed) is only released, its lease's
#: attempt taken back.
RECORD = Statement(
    "events.delivery.record",
    sql(
        """
UPDATE {delivery} d SET leased_until = NULL,
    status = CASE WHEN r.tried THEN r.status ELSE d.status END,
    attempts = CASE WHEN r.tried THEN d.attempts ELSE d.attempts - 1 END,
    last_attempt_at = CASE WHEN r.tried THEN r.at ELSE d.last_attempt_at END,
    response_code = CASE WHEN r.tried THEN r.code ELSE d.response_code END,
    latency_ms = CASE WHEN r.tried THEN r.latency ELSE d.latency_ms END,
    error = CASE WHEN r.tried THEN r.error ELSE d.error END,
    next_attempt_at = CASE WHEN r.tried THEN r.next_at ELSE d.next_attempt_at END,
    delivered_at = CASE WHEN r.tried AND r.status = %(delivered)s THEN r.at ELSE d.delivered_at END
FROM jsonb_to_recordset(%(outcomes)s::jsonb)
     AS r(id uuid, tried boolean, status varchar, at timestamptz, code int, latency int, error text,
          next_at timestamptz)
WHERE d.id = r.id AND d.status = %(scheduled)s
"""
    ),
    NoRow,
    example=lambda: {
        "outcomes": "[]",
        "delivered": DeliveryStatus.DELIVERED.value,
        "scheduled": DeliveryStatus.SCHEDULED.value,
    },
)


class Pruned(NamedTuple):
    events: int
    deliveries: int


#: One batch of pruning: events older than the retention, fanned out, whose every delivery was
#: delivered (or that had none), with their deliveries; and delivered deliveries older than it whose
#: event is kept (a sibling delivery still scheduled or failed: what Redeliver sends is kept).
PRUNE = Statement(
    "events.delivery.prune",
    sql(
        """
WITH old AS (
    {old}
), logs AS (
    SELECT d.id FROM {delivery} d WHERE d.status = %(delivered)s AND d.delivered_at < %(cutoff)s LIMIT %(limit)s
), gone_deliveries AS (
    DELETE FROM {delivery} d WHERE d.event_id IN (SELECT id FROM old) OR d.id IN (SELECT id FROM logs) RETURNING 1
), gone_events AS (
    DELETE FROM {event} e USING old WHERE e.id = old.id RETURNING 1
)
SELECT (SELECT count(*) FROM gone_events) AS events, (SELECT count(*) FROM gone_deliveries) AS deliveries
""",
        old=queue_rows_sql(
            TABLES["event"],
            "e",
            "e.id",
            sql(
                "e.fanned_out AND e.time < %(cutoff)s"
                " AND NOT EXISTS (SELECT 1 FROM {delivery} x WHERE x.event_id = e.id AND x.status <> %(delivered)s)"
            ),
            "e.time",
            "%(limit)s",
        ),
    ),
    Pruned,
    example=lambda: {"limit": 10, "cutoff": timezone.now(), "delivered": DeliveryStatus.DELIVERED.value},
)

#: Rows a pruning batch deletes at most (of each kind), and batches a round runs at most.
PRUNE_BATCH = 1000
PRUNE_BATCHES = 10


def retention() -> timedelta:
    return timedelta(days=int(getattr(settings, "FLEET_EVENTS_RETENTION_DAYS", 30)))


def prune(*, keep: timedelta | None = None, batch: int = PRUNE_BATCH, batches: int = PRUNE_BATCHES) -> Pruned:
    """Delete what is older than the retention (`FLEET_EVENTS_RETENTION_DAYS`), batch by batch
    (each its own short transaction), until a batch comes back short or `batches` ran."""
    cutoff = timezone.now() - (keep if keep is not None else retention())
    events = deliveries = 0
    for _ in range(batches):
        with transaction.atomic(), connection.cursor() as cursor:
            row = PRUNE.one(
                cursor, {"limit": batch, "cutoff": cutoff, "delivered": DeliveryStatus.DELIVERED.value}
            ) or Pruned(0, 0)
        events, deliveries = events + row.events, deliveries + row.deliveries
        if row.events < batch and row.deliveries < batch:
            break
    return Pruned(events, deliveries)


@dataclass(frozen=True)
class Tried:
    """One try's answer."""

    leased: Leased
    code: int | None
    latency_ms: int
    error: str
    at: datetime

    @property
    def ok(self) -> bool:
        return self.code is not None and 200 <= self.code < 300


def fan_out(*, limit: int = 500) -> FannedOut:
    with transaction.atomic(), connection.cursor() as cursor:
        row = FAN_OUT.one(cursor, {"limit": limit, "now": timezone.now(), "scheduled": DeliveryStatus.SCHEDULED.value})
    return row or FannedOut(0, 0)


def lease(*, limit: int, lease_for: timedelta) -> list[Leased]:
    now = timezone.now()
    with transaction.atomic(), connection.cursor() as cursor:
        return LEASE.rows(
            cursor,
            {"limit": limit, "now": now, "until": now + lease_for, "scheduled": DeliveryStatus.SCHEDULED.value},
        )


def send(client: httpx.Client, leased: Leased) -> Tried:
    """One signed POST: the SSRF check first (a clear error in the log), then the request (its
    connection checked again at connect time by a checked client; no redirects followed, timeouts,
    the answer read up to `MAX_RESPONSE_BYTES`)."""
    started = clock.monotonic()
    at = timezone.now()
    refused = url_refusal(leased.url, allow_private=leased.allow_private)
    if refused is not None:
        return Tried(leased, None, 0, f"refused: {refused}", at)
    doc = cloudevents.document(
        event_id=leased.event_id, type=leased.type, subject=leased.subject, time=leased.time, data=leased.data
    )
    body = cloudevents.body(doc)
    headers = webhooks.headers(leased.secret, str(leased.event_id), int(at.timestamp()), body) | {
        "user-agent": USER_AGENT
    }
    try:
        with client.stream("POST", leased.url, content=body, headers=headers) as response:
            read = b""
            for chunk in response.iter_bytes():
                read += chunk
                if len(read) >= MAX_RESPONSE_BYTES:
                    break
            code = response.status_code
            error = "" if 200 <= code < 300 else f"HTTP {code}: {read[:500].decode(errors='replace')}"
            if 300 <= code < 400:
                error = f"HTTP {code}: redirects are not followed ({response.headers.get('location', '')[:200]})"
    except httpx.HTTPError as exc:
        return Tried(leased, None, _ms(started), f"{type(exc).__name__}: {exc}"[:500], at)
    return Tried(leased, code, _ms(started), error, at)


def _ms(started: float) -> int:
    return int((clock.monotonic() - started) * 1000)


def record(
    tries: Sequence[Tried],
    *,
    untried: Sequence[Leased] = (),
    first_backoff: timedelta = webhooks.FIRST_BACKOFF,
    rng: Any = None,
) -> None:
    """Write what the tries came to (the retry schedule decided by `fleet_rules.webhooks`), release
    the `untried`, and mark or clear the subscriptions' failing state."""
    if not tries and not untried:
        return
    now = timezone.now()
    outcomes: list[dict[str, Any]] = []
    failed: set[UUID] = set()
    delivered: set[UUID] = set()
    for t in tries:
        status, next_at = DeliveryStatus.DELIVERED, None
        if t.ok:
            delivered.add(t.leased.subscription_id)
        else:
            retry = webhooks.next_try(
                attempts=t.leased.attempts,
                first_tried=t.leased.created_at,
                now=now,
                window=timedelta(seconds=t.leased.retry_window_seconds),
                first_backoff=first_backoff,
                rng=rng,
            )
            if retry.at is None:
                status = DeliveryStatus.FAILED
                failed.add(t.leased.subscription_id)
                log.warning("gave up delivering %s to %s: %s", t.leased.event_id, t.leased.url, t.error)
            else:
                status, next_at = DeliveryStatus.SCHEDULED, retry.at
        outcomes.append(
            {
                "id": str(t.leased.delivery_id),
                "tried": True,
                "status": status.value,
                "at": t.at.isoformat(),
                "code": t.code,
                "latency": t.latency_ms,
                "error": t.error,
                "next_at": next_at.isoformat() if next_at else None,
            }
        )
    outcomes += [{"id": str(u.delivery_id), "tried": False} for u in untried]
    with transaction.atomic():
        with connection.cursor() as cursor:
            RECORD.run(
                cursor,
                {
                    "outcomes": recordset(outcomes),
                    "delivered": DeliveryStatus.DELIVERED.value,
                    "scheduled": DeliveryStatus.SCHEDULED.value,
                },
            )
        if failed:
            Subscription.objects.filter(id__in=failed, failing_since__isnull=True).update(failing_since=now)
        if delivered - failed:
            Subscription.objects.filter(id__in=delivered - failed, failing_since__isnull=False).update(
                failing_since=None
            )


LIMITS = httpx.Limits(max_connections=64, max_keepalive_connections=32)


def new_client(*, allow_private: bool = False) -> httpx.Client:
    """The worker's HTTP client: no redirects, timeouts, no proxy from the environment (the SSRF
    check judges the address the request goes to), kept-alive connections. Unless for the
    subscriptions an admin allowed private targets, its connections resolve, check and connect to
    the checked address (`fleet.events.targets.CheckedBackend`: no DNS rebinding)."""
    return httpx.Client(
        timeout=TIMEOUT,
        follow_redirects=False,
        trust_env=False,
        limits=LIMITS,
        transport=None if allow_private else checked_transport(LIMITS),
    )


@dataclass(frozen=True)
class Clients:
    """The checked client, and the one for subscriptions allowed private targets."""

    checked: httpx.Client
    private: httpx.Client

    def for_(self, leased: Leased) -> httpx.Client:
        return self.private if leased.allow_private else self.checked


def _send_chain(client: httpx.Client, chain: Sequence[Leased]) -> tuple[list[Tried], list[Leased]]:
    """A subject's deliveries one after the other, in order, until one fails: the tries, and the
    deliveries left untried (released for a later pass, behind the failed one's retry)."""
    tries: list[Tried] = []
    for item in chain:
        tried = send(client, item)
        tries.append(tried)
        if not tried.ok:
            break
    return tries, list(chain[len(tries) :])


@dataclass
class Pass:
    fanned_out: FannedOut
    tried: int
    delivered: int


def deliver_pass(
    clients: Clients,
    pool: ThreadPoolExecutor,
    *,
    batch: int,
    lease_for: timedelta,
    first_backoff: timedelta = webhooks.FIRST_BACKOFF,
) -> Pass:
    """Fan out what is new, then send one batch of due deliveries concurrently and record them."""
    fanned = fan_out(limit=max(batch, 500))
    leased = lease(limit=batch, lease_for=lease_for)
    chains: dict[tuple[UUID, str], list[Leased]] = {}
    for item in leased:  # in the events' order
        chains.setdefault((item.subscription_id, item.subject), []).append(item)
    tries: list[Tried] = []
    untried: list[Leased] = []
    for sent, rest in pool.map(lambda chain: _send_chain(clients.for_(chain[0]), chain), chains.values()):
        tries += sent
        untried += rest
    record(tries, untried=untried, first_backoff=first_backoff)
    return Pass(fanned, len(tries), sum(t.ok for t in tries))


def deliver_forever(
    *,
    batch: int = 100,
    concurrency: int = 8,
    lease_for: timedelta = timedelta(seconds=60),
    first_backoff: timedelta = webhooks.FIRST_BACKOFF,
    idle: float = 1.0,
    stop: threading.Event | None = None,
    once: bool = False,
    on_pass: Callable[[Pass], None] | None = None,
    prune_every: float = 600.0,
) -> None:
    """Deliver until `stop` is set (or, with `once`, until nothing is due); prune what is older
    than the retention when starting and every `prune_every` seconds (0: never)."""
    stop = stop or threading.Event()
    pruned_at: float | None = None
    with (
        new_client() as checked,
        new_client(allow_private=True) as private,
        ThreadPoolExecutor(max_workers=concurrency) as pool,
    ):
        clients = Clients(checked, private)
        while not stop.is_set():
            if prune_every > 0 and (pruned_at is None or clock.monotonic() - pruned_at >= prune_every):
                pruned_at = clock.monotonic()
                gone = prune()
                if gone.events or gone.deliveries:
                    log.info("pruned %d events and %d deliveries past the retention", *gone)
            done = deliver_pass(clients, pool, batch=batch, lease_for=lease_for, first_backoff=first_backoff)
            if on_pass is not None:
                on_pass(done)
            if done.tried == 0 and done.fanned_out.events == 0:
                if once:
                    return
                stop.wait(idle)
