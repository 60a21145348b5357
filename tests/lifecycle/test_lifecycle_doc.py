"""docs/lifecycle.md's table says what `fleet_rules.lifecycle.TRANSITIONS` says: every row of one is
a row of the other, with the same states, the same causes for the service, and the same word for
people and the fleet file (yes, no, or "with a valid certificate"). A change to the table that the
page does not follow fails here."""

from __future__ import annotations

import re
from pathlib import Path

from fleet_rules.lifecycle import TRANSITIONS, Transition
from fleet_rules.vocabulary import DeviceState, Mover

DOC = Path(__file__).resolve().parents[2] / "docs" / "lifecycle.md"
PEOPLE = {Mover.OPERATOR, Mover.FLEET_FILE}


def _states(cell: str) -> frozenset[DeviceState]:
    cell = cell.strip()
    if cell.startswith("any but "):
        return frozenset(DeviceState) - {DeviceState(cell.removeprefix("any but ").strip())}
    return frozenset(DeviceState(s.strip()) for s in cell.split(","))


def _documented() -> list[tuple[frozenset[DeviceState], DeviceState, frozenset[str], str]]:
    """The page's table: (from, to, the service's causes, what people may do)."""
    text = DOC.read_text()
    table = text[text.index("| from | to |") :].split("\n\n", 1)[0].splitlines()[2:]
    rows = []
    for line in table:
        sources, to, system, people = (cell.strip() for cell in line.strip().strip("|").split("|"))
        causes = frozenset(re.findall(r"`([a-z_]+)`", system.split("(")[0]))  # the notes in brackets aside
        rows.append((_states(sources), DeviceState(to), causes, people))
    return rows


def _people(row: Transition) -> str:
    if not row.movers & PEOPLE:
        return "no"
    return "with a valid certificate" if row.certificate else "yes"


def test_the_page_s_table_is_the_rules_table():
    documented = _documented()
    assert documented, "no table found in docs/lifecycle.md"
    said = {(sources, to): (causes, people) for sources, to, causes, people in documented}
    assert len(said) == len(documented) == len(TRANSITIONS)
    for row in TRANSITIONS:
        key = (row.sources, row.to)
        assert key in said, f"docs/lifecycle.md has no row {sorted(s.value for s in row.sources)} → {row.to.value}"
        causes, people = said[key]
        assert causes == {c.value for c in row.causes}, (row.to, causes)
        assert people.startswith(_people(row)), (row.to, people, _people(row))
