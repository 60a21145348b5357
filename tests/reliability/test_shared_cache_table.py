"""The `shared` cache's table comes from the migrations alone. Django's test runner runs
`createcachetable` itself after migrating, which hid that the migration created a table called
`shared` instead (`createcachetable`'s arguments are table names): every freshly migrated server
answered its first token request with a 500. Seen failing on that code."""

from __future__ import annotations

from importlib import import_module

from django.core.cache import caches
from django.core.management import call_command
from django.db import connection


def _tables() -> list[str]:
    with connection.cursor() as cursor:
        return connection.introspection.table_names(cursor)


def test_the_migration_creates_the_table_the_shared_cache_reads(db):
    table = caches["shared"]._table
    with connection.schema_editor() as editor:
        editor.execute(f"DROP TABLE {connection.ops.quote_name(table)}")
        import_module("fleet.core.migrations.0001_shared_cache_table").create(None, editor)
    assert table in _tables() and "shared" not in _tables()
    assert caches["shared"].add("probe", 1) is True


def test_a_database_migrated_by_the_old_migration_is_repaired(db):
    table = caches["shared"]._table
    with connection.schema_editor() as editor:
        editor.execute(f"DROP TABLE {connection.ops.quote_name(table)}")
        call_command("createcachetable", "shared", verbosity=0)  # what the old migration ran
        assert "shared" in _tables()
        import_module("fleet.core.migrations.0002_shared_cache_table_name").repair(None, editor)
    assert table in _tables() and "shared" not in _tables()
