"""Cursors for the statements that read thousands of rows a request (reconcile pages,
certificate evidence, the upsert's executions).

Django decodes every `timestamptz` with a Python subclass of psycopg's loader (to attach its
time zone), about 2 µs a value: 3,000 a reconcile page, 175,000 in a first sweep's certificate
reads (profiled). With the session in UTC, as Django keeps it when `TIME_ZONE` is UTC, psycopg's
own loader (C) returns the same values with the same `datetime.timezone.utc`, seven times faster.
Any other set-up keeps Django's loader.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC

from django.db import connection
from django.db.backends.utils import CursorWrapper
from psycopg.types.datetime import TimestamptzLoader


@contextmanager
def bulk_read_cursor() -> Iterator[CursorWrapper]:
    """`connection.cursor()`, decoding timestamps with psycopg's C loader when that is exact."""
    with connection.cursor() as cursor:
        if connection.timezone is UTC and connection.connection.info.parameter_status("TimeZone") == "UTC":
            cursor.cursor.adapters.register_loader("timestamptz", TimestamptzLoader)
        yield cursor
