"""Row locks: the one place fleet takes them, and the order it takes them in.

**The lock order** (every writer takes its locks in this order, and each kind in its own key order,
so two transactions locking overlapping sets wait for each other instead of deadlocking):

1. projection rows (`PolicyProgress`), in a reconcile page's order: requirement name (collation
   "C"), then target (`lock_keys_in_order`);
2. devices, in primary-key order (`lock_in_pk_order`, `lock_keys_in_pk_order`, and `locked_sql`
   for a statement that locks them itself, as the lifecycle's writer and certificate issuance do);
3. the circuit breakers' scopes (site × resource class): transaction advisory locks, by key;
4. a scope's breaker row, and jobs and leases, after the devices they concern.

Every lock is `FOR NO KEY UPDATE`: it excludes other lockers of the rows, yet lets inserts that
merely reference them (an execution report naming the device) proceed, and a caller that holds it
already takes it again for free. Must run inside a transaction; the locks last until it ends.
`tests/lifecycle/test_one_writer.py` reads the sources: no other module locks devices or writes
`FOR … UPDATE` in SQL.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, TypeVar, overload

from django.db import models

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


def queue_rows_sql(table: str, alias: str, columns: str, where: str, order: str, limit: str) -> str:
    """A statement's part that takes up to `limit` rows of a work queue (the outbox, webhook
    deliveries) for one worker: `… FOR UPDATE SKIP LOCKED`. Rows another worker holds are skipped,
    never waited for, so no lock order is needed and two workers never take the same row. Only for
    queue rows, never devices (they are locked in primary-key order above)."""
    return _QUEUE.format(columns=columns, table=table, alias=alias, where=where, order=order, limit=limit, lock=SKIP)


SKIP = "FOR UPDATE SKIP LOCKED"
_QUEUE = "SELECT {columns} FROM {table} {alias} WHERE {where} ORDER BY {order} LIMIT {limit} {lock}"
