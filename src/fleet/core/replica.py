"""Reads on a streaming replica: with `DATABASE_REPLICA_URL` set, read-only page views that opt
in (`replica_reads`) read the domain's tables from the `replica` database; everything else —
every write, every API call, sessions, users, tokens — stays on `default`.

Only views whose readers can live with the replica's lag opt in (aggregate dashboard pages: a
count a second old is still the right picture); a page someone lands on right after a write (the
job a dispatch created) stays on the primary, so it never 404s on a row the replica has not
replayed yet. Sessions, users and OAuth tokens are never read from the replica for the same reason
(a fresh login must be seen by the next request).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

from django.db import connections
from django.db.backends.base.base import BaseDatabaseWrapper

REPLICA = "replica"

#: The apps whose tables a replica read may serve: the domain's, not auth, sessions or tokens.
REPLICA_APPS = frozenset({"inventory", "policies", "jobs", "burnin"})

_reading: ContextVar[bool] = ContextVar("fleet_replica_reads", default=False)


def replica_configured() -> bool:
    return REPLICA in connections.databases


@contextmanager
def replica_reads() -> Iterator[None]:
    """Within this block, domain reads go to the replica (when one is configured)."""
    token = _reading.set(True)
    try:
        yield
    finally:
        _reading.reset(token)


def read_alias() -> str:
    return REPLICA if _reading.get() and replica_configured() else "default"


def read_connection() -> BaseDatabaseWrapper:
    """The connection raw-SQL selectors read through: the replica inside `replica_reads`."""
    return connections[read_alias()]


class ReplicaRouter:
    """Django's database router for the replica: reads of the domain's models inside
    `replica_reads`, nothing else; never a write, never a migration (it replays the primary)."""

    def db_for_read(self, model: type[Any], **hints: Any) -> str | None:
        if model._meta.app_label in REPLICA_APPS and read_alias() == REPLICA:
            return REPLICA
        return None

    def db_for_write(self, model: type[Any], **hints: Any) -> str | None:
        return "default"

    def allow_relation(self, obj1: Any, obj2: Any, **hints: Any) -> bool | None:
        return True  # the same data on both

    def allow_migrate(self, db: str, app_label: str, **hints: Any) -> bool | None:
        return db != REPLICA
