"""Row locks: the one place fleet takes them, and the order it takes them in.

**The lock order** (every writer takes its locks in this order, and each kind in its own key order,
so two transactions locking overlapping sets wait for each other instead of deadlocking):

1. projection rows (`PolicyProgress`), in a reconcile page's order: requirement name (collation
   "C"), then target (`lock_keys_in_order`);
2. devices, in primary-key order (`lock_in_pk_order`, `lock_keys_in_pk_order`, and `locked_sql`
   for a statement that locks them itself, as the lifecycle's writer and certificate issuance do);
3. scopes (site × resource class): transaction advisory locks, by key (`scope_locks_sql`) — a
   scope's acceptance (certificate issuance: one page at a time completes a class, so the
   `class.accepted` event is written once) before its circuit breaker (a reconcile page issues,
   then judges its failures);
   (the autopilot's leadership is a session advisory lock on a connection of its own, `LeaderLock`,
   taken before any of these and never inside a transaction);
4. a scope's breaker row, and jobs and leases, after the devices they concern.

Every lock is `FOR NO KEY UPDATE`: it excludes other lockers of the rows, yet lets inserts that
merely reference them (an execution report naming the device) proceed, and a caller that holds it
already takes it again for free. Must run inside a transaction; the locks last until it ends.
`tests/lifecycle/test_one_writer.py` reads the sources: no other module locks devices or writes
`FOR … UPDATE` in SQL.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterable
from typing import Any, NamedTuple, TypeVar, overload

import psycopg
from django.db import connections, models
from psycopg import sql

from fleet.core.statements import Statement

M = TypeVar("M", bound=models.Model)
R = TypeVar("R", bound=tuple[Any, ...])

#: The lock every locker takes (see above).
LOCK_CLAUSE = "FOR NO KEY UPDATE"


def lock_in_pk_order(model: type[M], ids: Iterable[Any], *, related: tuple[str, ...] = ()) -> list[M]:
    """SELECT … FOR NO KEY UPDATE of these rows, ordered by primary key (one query)."""
    queryset = model._default_manager.filter(pk__among=set(ids)).order_by("pk")
    if related:
        queryset = queryset.select_related(*related)
    return list(queryset.select_for_update(no_key=True, of=("self",) if related else ()))


@overload
def lock_keys_in_pk_order(queryset: models.QuerySet[Any]) -> list[Any]: ...


@overload
def lock_keys_in_pk_order(queryset: models.QuerySet[Any], *, row: type[R]) -> list[R]: ...


def lock_keys_in_pk_order(queryset: models.QuerySet[Any], *, row: type[Any] | None = None) -> list[Any]:
    """The same locks as `lock_in_pk_order`, of the rows a query selects, for a caller that needs
    the locks, not the rows: only the keys come back (building 10,000 model instances was a tenth
    of a 10,000-device dispatch), or given `row` (a `NamedTuple` whose fields are the model's),
    those fields' values as that row type, read by name; and a set the database finds itself (a
    selection's cohorts) never travels to this process and back first."""
    return _keys(queryset.order_by("pk").select_for_update(no_key=True), row)


def lock_keys_in_order(queryset: models.QuerySet[Any], *ordering: Any, row: type[Any] | None = None) -> list[Any]:
    """`lock_keys_in_pk_order` in another order, for the rows the lock order above takes otherwise
    (projection rows in a reconcile page's order); only the selected model's rows are locked."""
    return _keys(queryset.order_by(*ordering).select_for_update(no_key=True, of=("self",)), row)


def _keys(locked: models.QuerySet[Any], row: type[Any] | None) -> list[Any]:
    if row is None:
        return list(locked.values_list("pk", flat=True))
    return list(map(row._make, locked.values_list(*row._fields)))


def locked_sql(table: str, alias: str, columns: str, where: str) -> str:
    """A statement's part that locks rows of `table` (its key `id`) as `lock_in_pk_order` does:
    `SELECT columns FROM table alias WHERE where ORDER BY alias.id FOR NO KEY UPDATE`. For a
    statement that locks what it then writes, or a CTE (composed once, at import)."""
    return _LOCKED.format(columns=columns, table=table, alias=alias, where=where, lock=LOCK_CLAUSE)


_LOCKED = "SELECT {columns} FROM {table} {alias} WHERE {where} ORDER BY {alias}.id {lock}"


def scope_locks_sql(keys: str) -> str:
    """A statement's part (a CTE or a whole SELECT) that takes a transaction advisory lock on each
    key of the `text[]` expression `keys`, in key order, waiting for each; one row, `locked` (how
    many). For the scopes of the lock order's third rank."""
    return _SCOPE_LOCKS.format(keys=keys)


_SCOPE_LOCKS = """SELECT count(pg_advisory_xact_lock(hashtextextended(k, 0))) AS locked
FROM (SELECT unnest({keys}) AS k ORDER BY 1) keys"""


def try_lock_sql(key: str) -> str:
    """A condition that takes the transaction advisory lock of the text expression `key` if it is
    free (true) or is held by another transaction (false, without waiting). For work queues only
    (a webhook subject's deliveries, taken by one worker's lease at a time), like `queue_rows_sql`:
    never waited for, so outside the lock order."""
    return f"pg_try_advisory_xact_lock(hashtextextended({key}, 0))"


class Leadership(NamedTuple):
    leading: bool


#: The leader's lock: a session advisory lock, taken when free, never waited for.
LEADER_TRY = Statement(
    "core.leader_try",
    "SELECT pg_try_advisory_lock(hashtextextended(%(key)s, 0)) AS leading",
    Leadership,
    example=lambda: {"key": "fleet.statement-test"},
)


class Alive(NamedTuple):
    alive: int


def _no_parameters() -> dict[str, Any]:
    return {}


LEADER_ALIVE = Statement("core.leader_alive", "SELECT 1 AS alive", Alive, example=_no_parameters)


class LeaderLock:
    """One leader at a time across processes: a session-level PostgreSQL advisory lock held on a
    connection of its own (not Django's, which a transaction error or `close_old_connections` may
    drop), so it lasts exactly as long as the process and its connection do — a leader that is
    killed, or whose connection breaks, lets the next process take over at once. The same
    connection LISTENs on `channel`: a writer's NOTIFY wakes the leader before its interval ends."""

    def __init__(self, key: str, *, channel: str | None = None) -> None:
        self.key = key
        self.channel = channel
        self._connection: psycopg.Connection[Any] | None = None

    def _connect(self) -> psycopg.Connection[Any]:
        params = connections["default"].get_connection_params()
        params.pop("cursor_factory", None)
        params.pop("context", None)
        conn = psycopg.connect(**params, autocommit=True)
        if self.channel:
            conn.execute(sql.SQL("LISTEN {}").format(sql.Identifier(self.channel)))
        return conn

    def acquire(self) -> bool:
        """Whether this process is the leader now (taking the lock when nobody holds it)."""
        if self.held():
            return True
        self.release()
        try:
            self._connection = self._connect()
            with self._connection.cursor() as cursor:
                row = LEADER_TRY.one(cursor, {"key": self.key})
        except psycopg.Error:
            self.release()
            return False
        if row is None or not row.leading:
            self.release()
            return False
        return True

    def held(self) -> bool:
        """Whether the lock's connection is alive (then the lock is ours)."""
        if self._connection is None or self._connection.closed:
            return False
        try:
            with self._connection.cursor() as cursor:
                LEADER_ALIVE.one(cursor, {})
        except psycopg.Error:
            return False
        return True

    def wait(self, timeout: float) -> bool:
        """Sleep until a NOTIFY on the channel or `timeout` seconds; True when woken."""
        if self._connection is None or self.channel is None:
            time.sleep(timeout)
            return False
        try:
            for _ in self._connection.notifies(timeout=timeout, stop_after=1):
                return True
        except psycopg.Error:
            return False
        return False

    def release(self) -> None:
        if self._connection is not None:
            with contextlib.suppress(psycopg.Error):
                self._connection.close()
        self._connection = None


def queue_rows_sql(table: str, alias: str, columns: str, where: str, order: str, limit: str) -> str:
    """A statement's part that takes up to `limit` rows of a work queue (the outbox, webhook
    deliveries) for one worker: `… FOR UPDATE SKIP LOCKED`. Rows another worker holds are skipped,
    never waited for, so no lock order is needed and two workers never take the same row. Only for
    queue rows, never devices (they are locked in primary-key order above)."""
    return _QUEUE.format(columns=columns, table=table, alias=alias, where=where, order=order, limit=limit, lock=SKIP)


SKIP = "FOR UPDATE SKIP LOCKED"
_QUEUE = "SELECT {columns} FROM {table} {alias} WHERE {where} ORDER BY {order} LIMIT {limit} {lock}"
