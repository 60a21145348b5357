"""`bulk_read_cursor` decodes timestamps with psycopg's C loader and must read exactly what
Django's cursor reads: the same instants, the same `datetime.timezone.utc`, in arrays and NULLs."""

from __future__ import annotations

from datetime import UTC

import pytest
from django.db import connection

from fleet.core.rows import bulk_read_cursor

pytestmark = pytest.mark.django_db

QUERY = """
SELECT g.t, ARRAY[g.t, NULL], NULL::timestamptz
FROM generate_series('0001-01-01 05:00:00.000001+05'::timestamptz, '0001-01-01 06:00:00+00'::timestamptz,
                     interval '7 minutes 0.000003 seconds') g(t)
UNION ALL
SELECT t, ARRAY[t], NULL FROM (VALUES ('2026-12-01 10:30:15.123456-07:30'::timestamptz),
                                      ('9999-12-31 23:59:59.999999+00'::timestamptz)) v(t)
"""


def test_the_bulk_cursor_reads_what_djangos_cursor_reads_with_psycopgs_c_loader():
    with connection.cursor() as cursor:
        cursor.execute(QUERY)
        expected = cursor.fetchall()
        django_loader = cursor.cursor.adapters.get_loader(1184, 0)
    with bulk_read_cursor() as cursor:
        cursor.execute(QUERY)
        rows = cursor.fetchall()
        loader = cursor.cursor.adapters.get_loader(1184, 0)
    assert loader is not django_loader
    assert loader.__module__.startswith("psycopg_binary"), loader  # the C implementation
    assert len(rows) == len(expected) > 5
    assert rows == expected
    for row in rows:
        assert row[0].tzinfo is UTC and row[1][0].tzinfo is UTC and row[1][1:] in ([], [None]) and row[2] is None
