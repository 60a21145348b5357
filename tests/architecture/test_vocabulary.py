"""No module spells a domain value as a bare string: verdicts, states, reasons, workflow names,
scopes and units come from `fleet_rules.vocabulary` (the one place they are defined).

Checked on the syntax tree of every service and rules module: a string equal to a vocabulary
value may not be compared with, passed as an argument, returned or assigned, and may not appear
quoted (`'passed'`) inside SQL text. Dictionary keys and subscripts are field names, not values,
and stay allowed (an evaluation payload has a `passed` key); so do docstrings and help texts.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from fleet_rules import vocabulary

REPO = Path(__file__).resolve().parents[2]
SOURCES = sorted((REPO / "src" / "fleet").rglob("*.py")) + sorted((REPO / "rules" / "src").rglob("*.py"))
#: The vocabulary itself, and the API's error codes (their own closed set, the spec's `ErrorCodeEnum`).
EXEMPT = {REPO / "rules" / "src" / "fleet_rules" / "vocabulary.py", REPO / "src" / "fleet" / "core" / "error_schema.py"}
#: Methods whose string argument is a key (a dict's, or a DRF error message's), not a value.
KEY_METHODS = {"get", "pop", "setdefault", "fail"}
#: Words that are also ordinary English or Python (an `all` in a flag's choices is not a mode).
TOO_COMMON = {"all"}
#: A lifecycle cause that is also the job-parameter key of an isolation round (`burnin.executions`).
TOO_COMMON |= {"isolation"}


def _vocabulary_values() -> set[str]:
    values: set[str] = set()
    for item in vars(vocabulary).values():
        if isinstance(item, type) and issubclass(item, vocabulary.Vocabulary) and item is not vocabulary.Vocabulary:
            values.update(item.values)
    return values | {vocabulary.RACK_ACCEPTANCE}


VALUES = _vocabulary_values() - TOO_COMMON
QUOTED = re.compile(r"'([a-zA-Z_-]+)'")


class _Finder(ast.NodeVisitor):
    def __init__(self) -> None:
        self.found: list[tuple[int, str]] = []
        self.in_enum = False

    def _check(self, node: ast.AST | None) -> None:
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in VALUES:
            self.found.append((node.lineno, node.value))

    def visit_Compare(self, node: ast.Compare) -> None:
        for operand in [node.left, *node.comparators]:
            self._check(operand)
            if isinstance(operand, (ast.Tuple, ast.List, ast.Set)):
                for element in operand.elts:
                    self._check(element)
        self.generic_visit(node)

    def visit_Call(self, node: ast.Call) -> None:
        keyed = isinstance(node.func, ast.Attribute) and node.func.attr in KEY_METHODS
        for argument in [*node.args[1 if keyed else 0 :], *(k.value for k in node.keywords)]:
            self._check(argument)
        self.generic_visit(node)

    def visit_Return(self, node: ast.Return) -> None:
        self._check(node.value)
        self.generic_visit(node)

    def visit_Assign(self, node: ast.Assign) -> None:
        if not self.in_enum:
            self._check(node.value)
        self.generic_visit(node)

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        """An enum's members are a vocabulary's own definition (another closed set of words)."""
        outer, self.in_enum = (
            self.in_enum,
            any(
                isinstance(base, ast.Name) and (base.id.endswith("Enum") or base.id == "Vocabulary")
                for base in node.bases
            ),
        )
        self.generic_visit(node)
        self.in_enum = outer

    def visit_Constant(self, node: ast.Constant) -> None:
        if isinstance(node.value, str) and ("SELECT" in node.value or "WHERE" in node.value):
            for value in QUOTED.findall(node.value):
                if value in VALUES:
                    self.found.append((node.lineno, f"'{value}' in SQL"))


@pytest.mark.parametrize("path", SOURCES, ids=[str(p.relative_to(REPO)) for p in SOURCES])
def test_no_bare_domain_value(path):
    if path in EXEMPT or "migrations" in path.parts:
        return
    finder = _Finder()
    finder.visit(ast.parse(path.read_text()))
    assert finder.found == [], f"{path.relative_to(REPO)} spells vocabulary values as strings: {finder.found}"


def test_the_check_finds_what_it_forbids():
    finder = _Finder()
    finder.visit(ast.parse('if verdict == "passed": f(status="running")\nq = "SELECT 1 WHERE s = \'errored\'"'))
    finder.visit(ast.parse('payload.get("passed"); self.fail("invalid"); row["passed"]'))
    assert [value for _, value in finder.found] == ["passed", "running", "'errored' in SQL"]
