"""The Xid and SXid catalogues hold every code of NVIDIA's public sheets, in the sheets' words, and each
code's step follows the sheet's immediate resolution unless `XID_POLICY` says why not."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from fleet_rules.vocabulary import XidResolution, XidSeverity
from fleet_rules.xid_catalogue import SHEET_RESOLUTIONS, SXID_CATALOGUE, XID_CATALOGUE, XID_POLICY

FIXTURES = Path(__file__).parent / "fixtures"
XID_SHEET = json.loads((FIXTURES / "xid_catalogue.json").read_text())
SXID_SHEET = json.loads((FIXTURES / "sxid_catalogue.json").read_text())


def test_the_fixtures_name_their_public_source_and_commit() -> None:
    for sheet in (XID_SHEET, SXID_SHEET):
        assert sheet["catalogue"].startswith("https://docs.nvidia.com/")
        assert sheet["source_commit"] in sheet["source"] and len(sheet["source_commit"]) == 40
    assert len(XID_SHEET["codes"]) == 172 and len(SXID_SHEET["codes"]) == 92


def test_every_xid_of_the_sheet_is_in_the_table_in_the_sheets_words() -> None:
    sheet = {row["code"]: row for row in XID_SHEET["codes"]}

    assert set(XID_CATALOGUE) == set(sheet)
    for code, entry in XID_CATALOGUE.items():
        row = sheet[code]
        assert (entry.mnemonic, entry.meaning, entry.sheet_resolution) == (
            row["mnemonic"],
            row["description"],
            row["immediate_resolution"],
        ), code


def test_every_xid_takes_the_sheets_step_unless_the_policy_says_why() -> None:
    for row in XID_SHEET["codes"]:
        entry = XID_CATALOGUE[row["code"]]
        if row["code"] in XID_POLICY:
            step, why = XID_POLICY[row["code"]]
            assert entry.resolution is step and why in entry.source
        else:
            assert entry.resolution is SHEET_RESOLUTIONS[row["immediate_resolution"]], row
        assert "docs.nvidia.com" in entry.source


def test_every_resolution_the_sheet_uses_has_a_step() -> None:
    assert {row["immediate_resolution"] for row in XID_SHEET["codes"]} == set(SHEET_RESOLUTIONS)


def test_every_sxid_of_the_guide_is_in_the_table_with_its_class() -> None:
    sheet = {row["code"]: row for row in SXID_SHEET["codes"]}

    assert set(SXID_CATALOGUE) == set(sheet)
    for code, entry in SXID_CATALOGUE.items():
        row = sheet[code]
        kind = "always fatal" if row["always_fatal"] else "potentially fatal" if row["potential_fatal"] else "non-fatal"
        assert (entry.mnemonic, entry.sheet_resolution) == (row["name"], kind), code
        assert entry.resolution is (XidResolution.REBOOT if row["potential_fatal"] else XidResolution.NONE)


@pytest.mark.parametrize(
    ("code", "step"),
    [
        (13, XidResolution.RESTART_APP),  # graphics engine exception: the application's
        (31, XidResolution.RESTART_APP),  # memory page fault: the application's
        (43, XidResolution.NONE),
        (48, XidResolution.RESET_GPU),  # double-bit ECC: reset, the row is remapped
        (63, XidResolution.RESET_GPU),  # the policy's: apply the pending remap now
        (74, XidResolution.RESET_GPU),  # NVLink: the workflow starts with a reset
        (79, XidResolution.REBOOT),  # fallen off the bus: restart the machine
        (94, XidResolution.RESTART_APP),  # contained ECC: restart the application
        (95, XidResolution.RESET_GPU),  # uncontained ECC: reset the GPU
        (54, XidResolution.REPAIR),  # auxiliary power not connected: a person must act
    ],
)
def test_the_well_known_codes_ask_for_what_nvidia_says(code: int, step: XidResolution) -> None:
    assert XID_CATALOGUE[code].resolution is step


def test_severity_follows_the_step_and_sxids_fatal_to_the_fabric_are_fatal() -> None:
    assert XID_CATALOGUE[95].severity is XidSeverity.RECOVERABLE
    assert XID_CATALOGUE[13].severity is XidSeverity.APPLICATION
    assert XID_CATALOGUE[54].severity is XidSeverity.FATAL
    assert SXID_CATALOGUE[22003].severity is XidSeverity.FATAL  # always fatal: Minion halt
    assert SXID_CATALOGUE[22003].resolution is XidResolution.REBOOT  # … until the host restarts


def test_the_docs_print_every_code_with_its_step() -> None:
    text = (Path(__file__).resolve().parents[2] / "docs" / "xid-catalogue.md").read_text()
    xid_part, sxid_part = text.split("\n## Xid\n")[1].split("\n## SXid\n")
    printed_xids = {int(c): step for c, step in re.findall(r"^\| (\d+) \|.*\| `(\w+)` \| \w+ \|$", xid_part, re.M)}
    printed_sxids = {int(c): step for c, step in re.findall(r"^\| (\d+) \|.*\| `(\w+)` \| \w+ \|$", sxid_part, re.M)}

    assert printed_xids == {code: e.resolution.value for code, e in XID_CATALOGUE.items()}
    assert printed_sxids == {code: e.resolution.value for code, e in SXID_CATALOGUE.items()}
