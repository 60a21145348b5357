"""The fatal Xid/SXid table: every entry sourced, application errors never fatal, and docs/agent.md prints it."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from fleet_rules.xid import FATAL_SXID, FATAL_XID, XidKind, is_fatal

DOCS = Path(__file__).resolve().parents[2] / "docs" / "agent.md"


def test_every_fatal_code_names_its_meaning_and_source() -> None:
    for table in (FATAL_XID, FATAL_SXID):
        for code, event in table.items():
            assert event.meaning and event.source, code
            assert "NVIDIA" in event.source, (code, event.source)


@pytest.mark.parametrize("code", [48, 63, 64, 74, 79, 92, 94, 95, 119, 120, 140, 158, 171, 172])
def test_hardware_xids_are_fatal(code: int) -> None:
    assert is_fatal(XidKind.XID, code)


@pytest.mark.parametrize("code", [13, 31, 43, 45, 8, 109])
def test_application_xids_are_counted_but_not_fatal(code: int) -> None:
    assert not is_fatal(XidKind.XID, code)


def test_sxids_are_judged_by_their_own_table() -> None:
    assert is_fatal(XidKind.SXID, 22003) and is_fatal(XidKind.SXID, 23017)
    assert not is_fatal(XidKind.SXID, 20034)  # fatal to one link, not to the fabric
    assert not is_fatal(XidKind.SXID, 79)  # an Xid code is not an SXid code
    assert not is_fatal(XidKind.XID, 22003)


def test_docs_print_exactly_the_table() -> None:
    text = DOCS.read_text()
    section = text[text.index("### Fatal Xid and SXid codes") :]
    section = re.split(r"\n#{2,} ", section, maxsplit=1)[0]  # up to the next heading, whatever its level
    xids = {int(m) for m in re.findall(r"^\| (\d+) \|", section, re.MULTILINE) if int(m) < 1000}
    sxid_rows = re.findall(r"^\| (\d{5})(?: – (\d{5}))? \|", section, re.MULTILINE)
    sxids = {code for low, high in sxid_rows for code in range(int(low), int(high or low) + 1)}

    assert xids == set(FATAL_XID)
    assert sxids == set(FATAL_SXID)
