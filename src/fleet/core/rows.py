"""Bulk statements: cursors for the reads of thousands of rows a request (reconcile pages,
certificate evidence, the upsert's executions), and the one form the bulk writes send their rows in.

Django decodes every `timestamptz` with a Python subclass of psycopg's loader (to attach its
time zone), about 2 µs a value: 3,000 a reconcile page, 175,000 in a first sweep's certificate
reads (profiled). With the session in UTC, as Django keeps it when `TIME_ZONE` is UTC, psycopg's
own loader (C) returns the same values with the same `datetime.timezone.utc`, seven times faster.
Any other set-up keeps Django's loader.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from datetime import UTC

from django.db import connection
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.backends.utils import CursorWrapper
from psycopg.types.datetime import TimestamptzLoader


@contextmanager
def bulk_read_cursor(using: BaseDatabaseWrapper | None = None) -> Iterator[CursorWrapper]:
    """`connection.cursor()` (or `using`'s), decoding timestamps with psycopg's C loader when that
    is exact."""
    database = using or connection
    with database.cursor() as cursor:
        if database.timezone is UTC and database.connection.info.parameter_status("TimeZone") == "UTC":
            cursor.cursor.adapters.register_loader("timestamptz", TimestamptzLoader)
        yield cursor


def recordset(rows: Iterable[Mapping[str, object]]) -> str:
    """Rows for `jsonb_to_recordset(%s::jsonb) AS b(col type, …)`: one JSON document, not one bound
    array per column. Django binds client-side, and psycopg quotes array elements one by one in
    Python (about half of a 500-row upsert's statement time, profiled); one `json.dumps` is C.
    Values must be JSON already: uuids and instants as text (ISO 8601 with offset and
    microseconds reads back as the same timestamptz)."""
    return json.dumps(list(rows), separators=(",", ":"), allow_nan=False)


def id_text(ids: Iterable[object]) -> str:
    """Ids as one text value, read back by `ids_sql` (or `field__among`): a list bound the Django way
    is quoted element by element in Python, about 15 µs each (4.5 of a 10,000-device dispatch's
    20 s went to quoting 295,000 ids, profiled); `str.join` is C."""
    return ",".join(map(str, ids))


def ids_sql(text: str, element: str = "uuid") -> str:
    """The SQL that reads `id_text`'s value (the parameter or column `text`) back as an array."""
    return f"string_to_array({text}, ',')::{element}[]"


def text_or_none(value: object) -> str | None:
    return None if value is None else str(value)
