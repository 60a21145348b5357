"""Row locks, always taken in primary-key order so two transactions locking overlapping sets
wait for each other instead of deadlocking."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, TypeVar, overload

from django.db import models

M = TypeVar("M", bound=models.Model)
R = TypeVar("R", bound=tuple[Any, ...])


def lock_in_pk_order(model: type[M], ids: Iterable[Any], *, related: tuple[str, ...] = ()) -> list[M]:
    """SELECT … FOR UPDATE of these rows, ordered by primary key (one query). Must run inside a
    transaction; the locks last until it ends."""
    queryset = model._default_manager.filter(pk__among=set(ids)).order_by("pk")
    if related:
        queryset = queryset.select_related(*related)
    # FOR NO KEY UPDATE: excludes other lockers of these rows, yet lets inserts that merely
    # reference them (an execution report naming the device) proceed.
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
    locked = queryset.order_by("pk").select_for_update(no_key=True)
    if row is None:
        return list(locked.values_list("pk", flat=True))
    return list(map(row._make, locked.values_list(*row._fields)))
