"""Named SQL statements with typed rows: the one way fleet writes raw SQL.

Raw SQL is kept where a measurement earned it (the figure stands beside each statement). Each is a
module-level `Statement`: a name, its text composed once at import from table names and named
fragments (plain f-strings and `str.format` of constants, never a second pass over finished
text), the `NamedTuple` its rows are read into, and example parameters with which
`tests/core/test_statements.py` runs every registered statement against the migrated schema:
EXPLAIN, then the columns it returns compared by name and order with its row type. A statement
whose text is shaped per call (how many requirements a reconcile page spans) is a
`StatementFamily`: one builder, each shape's text built once and cached, the test checking the
example shapes.

Rows are read by name: `Statement.rows` checks the cursor's column names against the row type on
every call (a few microseconds) and makes each row with `_make`, so a column added in the middle
of a select list fails loudly instead of shifting every later value into the wrong field. Nothing
outside this module calls `cursor.execute` with SQL text (a test reads the source to hold that).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping, Sequence
from functools import lru_cache
from typing import Any, Generic, NamedTuple, Protocol, TypeVar

Params = Mapping[str, Any] | Sequence[Any]
RowT = TypeVar("RowT", bound=tuple[Any, ...])

#: Every statement by name, filled as modules are imported (the statement test imports them all).
REGISTRY: dict[str, Statement[Any]] = {}
#: Every statement family by name.
FAMILIES: dict[str, StatementFamily[Any, Any]] = {}


class Cursor(Protocol):
    """What a statement needs of a cursor: Django's `CursorWrapper` or a psycopg cursor."""

    @property
    def description(self) -> Any: ...

    @property
    def rowcount(self) -> int: ...

    def execute(self, query: Any, params: Any = ...) -> Any: ...

    def fetchall(self) -> Any: ...

    def fetchone(self) -> Any: ...


class StatementShapeError(RuntimeError):
    """A statement returned other columns than its row type names: the code and the SQL disagree."""


class NoRow(NamedTuple):
    """The row type of a statement that returns no rows."""


def _columns(cursor: Cursor) -> tuple[str, ...]:
    return tuple(column.name for column in cursor.description or ())


class Statement(Generic[RowT]):
    """One SQL statement, its row type, and example parameters for the statement test."""

    __slots__ = ("example", "name", "row", "text")

    def __init__(
        self,
        name: str,
        text: str,
        row: type[RowT],
        *,
        example: Callable[[], Params],
        register: bool = True,
    ) -> None:
        self.name = name
        self.text = text
        self.row = row
        self.example = example
        if register:
            if name in REGISTRY:
                raise ValueError(f"Two statements are named {name!r}.")
            REGISTRY[name] = self

    def __repr__(self) -> str:
        return f"Statement({self.name!r})"

    def run(self, cursor: Cursor, params: Params) -> int:
        """Execute; the rows it affected. For statements that return no rows (`NoRow`)."""
        cursor.execute(self.text, params)
        return cursor.rowcount

    def rows(self, cursor: Cursor, params: Params) -> list[RowT]:
        """Execute and read every row, by name."""
        cursor.execute(self.text, params)
        self.check_columns(_columns(cursor))
        make = self.row._make  # type: ignore[attr-defined]
        return [make(values) for values in cursor.fetchall()]

    def one(self, cursor: Cursor, params: Params) -> RowT | None:
        """Execute and read the first row (None when there is none)."""
        cursor.execute(self.text, params)
        self.check_columns(_columns(cursor))
        values = cursor.fetchone()
        return None if values is None else self.row._make(values)  # type: ignore[attr-defined]

    def check_columns(self, columns: tuple[str, ...]) -> None:
        expected: tuple[str, ...] = self.row._fields  # type: ignore[attr-defined]
        if columns != expected:
            raise StatementShapeError(
                f"Statement {self.name!r} returned columns {list(columns)}; its row type "
                f"{self.row.__name__} names {list(expected)}."
            )


ShapeT = TypeVar("ShapeT", bound=Hashable)


class StatementFamily(Generic[ShapeT, RowT]):
    """Statements of one row type whose text depends on a hashable shape (e.g. which kinds of
    branch a reconcile page unions): `build(shape)` composes the text once per shape; `examples`
    are the shapes (with parameters) the statement test checks."""

    def __init__(
        self,
        name: str,
        build: Callable[[ShapeT], str],
        row: type[RowT],
        *,
        examples: Callable[[], Sequence[tuple[ShapeT, Params]]],
    ) -> None:
        if name in FAMILIES or name in REGISTRY:
            raise ValueError(f"Two statements are named {name!r}.")
        self.name = name
        self.row = row
        self.examples = examples
        self._build = build
        FAMILIES[name] = self

    def __repr__(self) -> str:
        return f"StatementFamily({self.name!r})"

    def shape(self, shape: ShapeT) -> Statement[RowT]:
        """The statement of this shape (its text composed on first use, then reused)."""
        return self._shaped(shape)

    @lru_cache(maxsize=512)  # noqa: B019 - families are module-level objects that live as long as the process
    def _shaped(self, shape: ShapeT) -> Statement[RowT]:
        return Statement(f"{self.name}[{shape!r}]", self._build(shape), self.row, example=lambda: (), register=False)


def select_list(row: type[tuple[Any, ...]], expressions: Mapping[str, str]) -> str:
    """A select list in the row type's field order: `expression AS field, …`. Every field must have
    its expression and every expression a field, so the two cannot drift apart."""
    fields: tuple[str, ...] = row._fields  # type: ignore[attr-defined]
    missing = [name for name in fields if name not in expressions]
    extra = [name for name in expressions if name not in fields]
    if missing or extra:
        raise ValueError(f"select list for {row.__name__}: missing {missing}, not in the row type {extra}")
    return ", ".join(f"{expressions[name]} AS {name}" for name in fields)
