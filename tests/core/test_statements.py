"""Every registered SQL statement checked on its own against the migrated schema: its plan (EXPLAIN
with its example parameters) and the columns it returns (by name and order, against its row type).
And the source read for what would escape the layer: SQL text executed outside
`fleet.core.statements`, rows read by position."""

from __future__ import annotations

import ast
import importlib
import pkgutil
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NamedTuple

import pytest
from django.db import connection, transaction

import fleet
from fleet.core.statements import (
    FAMILIES,
    REGISTRY,
    NoRow,
    Statement,
    StatementFamily,
    StatementShapeError,
    select_list,
)

SRC = Path(fleet.__file__).parent
#: Modules that are entry points with side effects at import, not statement holders.
_NOT_IMPORTED = {"fleet.asgi", "fleet.wsgi", "fleet.__main__"}


def _import_everything() -> None:
    for module in pkgutil.walk_packages(fleet.__path__, "fleet."):
        if module.name in _NOT_IMPORTED or ".migrations" in module.name:
            continue
        importlib.import_module(module.name)


_import_everything()


def _statements() -> list[tuple[str, Statement[Any], Any]]:
    found: list[tuple[str, Statement[Any], Any]] = [(name, s, s.example) for name, s in sorted(REGISTRY.items())]
    for name, family in sorted(FAMILIES.items()):
        for i, (shape, params) in enumerate(family.examples()):
            found.append((f"{name}#{i}", family.shape(shape), lambda params=params: params))
    return found


STATEMENTS = _statements()


class _Rollback(Exception):
    pass


def _run(statement: Statement[Any], params: Any) -> tuple[list[str], tuple[str, ...] | None]:
    """EXPLAIN the statement and execute it, inside a savepoint rolled back after: its plan's
    lines and the names of the columns it returns (None when it returns no rows)."""
    result: dict[str, Any] = {}
    try:
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute("EXPLAIN " + statement.text, params)
            result["plan"] = [line for (line,) in cursor.fetchall()]
            cursor.execute(statement.text, params)
            result["columns"] = tuple(c.name for c in cursor.description) if cursor.description else None
            raise _Rollback
    except _Rollback:
        pass
    return result["plan"], result["columns"]


def test_the_registry_holds_the_statements_of_every_app():
    """Every app whose modules define a statement has them registered (and so checked below),
    each under its own app's name: the list is read from the sources, not kept by hand."""
    defining = {
        path.relative_to(SRC).parts[0]
        for path, node in _nodes()
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id in {Statement.__name__, StatementFamily.__name__}
    }
    registered = {name.split(".")[0] for name, _, _ in STATEMENTS}
    assert defining == registered, (defining, registered)
    assert {"burnin", "jobs", "fleetfile", "core", "lifecycle"} <= registered, registered
    # where a statement is defined: its example's module (a family's: its examples')
    defined_in = {name: s.example.__module__ for name, s in REGISTRY.items()}
    defined_in |= {name: f.examples.__module__ for name, f in FAMILIES.items()}
    misnamed = {n: m for n, m in defined_in.items() if not m.startswith(f"fleet.{n.split('.')[0]}.")}
    assert not misnamed, f"statements named after another app than the one defining them: {misnamed}"


@pytest.mark.django_db
@pytest.mark.parametrize(("name", "statement", "example"), STATEMENTS, ids=[s[0] for s in STATEMENTS])
def test_each_statement_plans_and_returns_its_row_type(name, statement, example):
    plan, columns = _run(statement, example())
    assert plan, f"{name}: EXPLAIN gave no plan"
    expected = statement.row._fields
    if statement.row is NoRow:
        assert columns is None, f"{name} returns columns {columns} but declares no row"
    else:
        assert columns == expected, f"{name} returns {columns}; {statement.row.__name__} names {expected}"


@pytest.mark.django_db
def test_a_statement_whose_columns_drift_from_its_row_type_fails_when_read():
    class TwoColumns(NamedTuple):
        first: int
        second: int

    drifted = Statement("test.drifted", "SELECT 1 AS first, 2 AS third", TwoColumns, example=dict, register=False)
    with connection.cursor() as cursor, pytest.raises(StatementShapeError, match="third"):
        drifted.rows(cursor, {})
    with connection.cursor() as cursor:
        right = Statement("test.right", "SELECT 1 AS first, 2 AS second", TwoColumns, example=dict, register=False)
        assert right.rows(cursor, {}) == [TwoColumns(1, 2)]
        assert right.one(cursor, {}).second == 2


def test_a_row_type_gaining_a_field_is_caught_by_the_check():
    class Grown(NamedTuple):
        first: int
        second: int

    statement = Statement("test.grown", "SELECT 1 AS first", Grown, example=dict, register=False)
    with pytest.raises(StatementShapeError):
        statement.check_columns(("first",))


def test_select_list_follows_the_row_type_and_refuses_strays():
    class Pair(NamedTuple):
        a: int
        b: int

    assert select_list(Pair, {"b": "x.b", "a": "x.a"}) == "x.a AS a, x.b AS b"
    with pytest.raises(ValueError, match="missing"):
        select_list(Pair, {"a": "x.a"})
    with pytest.raises(ValueError, match="not in the row type"):
        select_list(Pair, {"a": "x.a", "b": "x.b", "c": "x.c"})


def test_two_statements_cannot_share_a_name():
    name = next(iter(REGISTRY))
    with pytest.raises(ValueError, match="named"):
        Statement(name, "SELECT 1", NoRow, example=dict)


# --- what would escape the layer ---------------------------------------------------------------------

_LAYER = SRC / "core" / "statements.py"


def _nodes() -> Iterator[tuple[Path, ast.AST]]:
    """Every syntax node of the service's modules outside the layer (migrations aside), with its file."""
    for path in sorted(SRC.rglob("*.py")):
        if "migrations" not in path.parts and path != _LAYER:
            for node in ast.walk(ast.parse(path.read_text(), str(path))):
                yield path, node


def _is_identifier_composition(node: ast.expr) -> bool:
    """`sql.SQL("…").format(…)`: psycopg's composition of identifiers, which cannot be bound (an
    ANALYZE's table names, CREATE DATABASE's name)."""
    return (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "format"
        and isinstance(node.func.value, ast.Call)
        and isinstance(node.func.value.func, ast.Attribute)
        and node.func.value.func.attr == "SQL"
    )


def test_no_sql_text_is_executed_outside_the_statement_layer():
    offenders = [
        f"{path.relative_to(SRC)}:{node.lineno}"
        for path, node in _nodes()
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr in {"execute", "executemany"}
        and node.args
        and not _is_identifier_composition(node.args[0])
    ]
    assert not offenders, f"SQL executed outside fleet.core.statements (register a Statement): {offenders}"


_ROW_NAME = re.compile(r"(^|_)rows?$")


def test_no_row_is_read_by_position_outside_the_statement_layer():
    offenders = [
        f"{path.relative_to(SRC)}:{node.lineno} {ast.unparse(node)}"
        for path, node in _nodes()
        if isinstance(node, ast.Subscript)
        and isinstance(node.value, ast.Name)
        and _ROW_NAME.search(node.value.id)
        and (
            isinstance(node.slice, ast.Slice)
            or (isinstance(node.slice, ast.Constant) and isinstance(node.slice.value, int))
        )
    ]
    assert not offenders, f"rows read by position (read them by name through a Statement's row type): {offenders}"
