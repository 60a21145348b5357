"""Waiting, in a test, until another transaction blocks on a lock of the test database."""

from __future__ import annotations

import time

import pytest
from django.db import connection


def wait_for_lock_wait(what: str, timeout: float = 10) -> None:
    """Until some backend of this database waits on a lock (`what` names the waiter for the
    failure message). The snapshot of `pg_stat_activity` is cleared on every look: inside a
    transaction it is otherwise taken once and never changes."""
    deadline = time.monotonic() + timeout
    with connection.cursor() as cursor:
        while time.monotonic() < deadline:
            cursor.execute("SELECT pg_stat_clear_snapshot()")
            cursor.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'"
            )
            if cursor.fetchone()[0]:
                return
            time.sleep(0.02)
    pytest.fail(f"{what} never waited on a lock")
