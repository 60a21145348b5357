"""A checksum of every table in the test database: "nothing was written" as a fact about the whole
database, not about the tables a test thought of."""

from __future__ import annotations

from django.db import connection

#: Tables whose writes are the point of a refused request, each with why.
EXPECTED_WRITERS = {
    # The shared cache counts failed bearer authentications per address (docs/api.md, 429 row):
    # a refused token is meant to leave a count there.
    "fleet_shared_cache": "failed authentications are counted here by design",
}


def table_checksums(exclude: dict[str, str] | None = None) -> dict[str, tuple[int, str]]:
    """{table: (rows, md5 of its rows in a stable order)} for every table of the current schema."""
    skip = EXPECTED_WRITERS if exclude is None else exclude
    with connection.cursor() as cursor:
        cursor.execute("SELECT tablename FROM pg_tables WHERE schemaname = current_schema() ORDER BY tablename")
        tables = [name for (name,) in cursor.fetchall() if name not in skip]
        sums = {}
        for table in tables:
            quoted = connection.ops.quote_name(table)
            cursor.execute(
                f"SELECT count(*), coalesce(md5(string_agg(md5(t::text), '' ORDER BY md5(t::text))), '') "  # noqa: S608 - a table name from pg_tables, quoted
                f"FROM {quoted} AS t"
            )
            sums[table] = cursor.fetchone()
    return sums


def changed_tables(before: dict[str, tuple[int, str]], after: dict[str, tuple[int, str]]) -> list[str]:
    return sorted(t for t in before.keys() | after.keys() if before.get(t) != after.get(t))
