"""Verdict derivation and row decisions (`fleet_rules.verdicts`), table-driven, no database. (Moved from
tests/burnin/test_verdicts.py.)"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from uuid import uuid4

import pytest

from fleet_rules.verdicts import Derived, Evidence, RowAction, StoredRow, decide_row, derive_verdict

KEY, OLD_KEY = "a" * 64, "b" * 64
T0 = datetime(2026, 11, 30, 10, 0, tzinfo=UTC)
T1, T2 = T0 + timedelta(seconds=1), T0 + timedelta(seconds=2)
EXEC = uuid4()


def evidence(status="completed", updated_at=T0, passed=True, key=KEY, evaluated_for=T0, at=T1):
    return Evidence(EXEC, status, updated_at, passed, key, evaluated_for, at)


DERIVATIONS = [
    ("no execution", None, Derived("not_run", None, None, None)),
    (
        "running",
        evidence(status="running", passed=None, key=None, evaluated_for=None, at=None),
        Derived("in_progress", EXEC, None, T0),
    ),
    ("running with an old evaluation", evidence(status="running"), Derived("in_progress", EXEC, None, T0)),
    ("completed, current passing evaluation", evidence(), Derived("passed", EXEC, KEY, T1)),
    ("completed, current failing evaluation", evidence(passed=False), Derived("failed", EXEC, KEY, T1)),
    ("errored, current evaluation", evidence(status="errored", passed=False), Derived("errored", EXEC, KEY, T1)),
    ("errored is never passed", evidence(status="errored", passed=True), Derived("errored", EXEC, KEY, T1)),
    ("completed, no evaluation", evidence(passed=None, key=None, evaluated_for=None, at=None), None),
    ("completed, evaluation for another key", evidence(key=OLD_KEY), None),
    ("completed, evaluation for an older update", evidence(updated_at=T1, evaluated_for=T0), None),
    ("errored, no evaluation", evidence(status="errored", passed=None, key=None, evaluated_for=None, at=None), None),
]


@pytest.mark.parametrize(("case", "given", "expected"), DERIVATIONS, ids=[c[0] for c in DERIVATIONS])
def test_derive_verdict(case, given, expected):
    assert derive_verdict(given, KEY) == expected


PASSED_T1 = Derived("passed", EXEC, KEY, T1)


def row(verdict="passed", execution=EXEC, key=KEY, version=3, watermark=T1, in_scope=True):
    return StoredRow(verdict, execution, key, version, watermark, in_scope)


DECISIONS = [
    ("no row yet", PASSED_T1, None, RowAction.WRITE),
    ("exactly the derived state: nothing to write", PASSED_T1, row(), RowAction.KEEP),
    ("another verdict, older watermark", PASSED_T1, row(verdict="failed", watermark=T0), RowAction.WRITE),
    ("another policy version", PASSED_T1, row(version=2), RowAction.WRITE),
    ("moved to another scope", PASSED_T1, row(in_scope=False), RowAction.WRITE),
    ("a newer watermark is kept", PASSED_T1, row(verdict="in_progress", watermark=T2), RowAction.KEEP_NEWER),
    ("not_run never replaces evidence", Derived("not_run", None, None, None), row(), RowAction.KEEP_NEWER),
    (
        "a null stored watermark is older",
        Derived("in_progress", EXEC, None, T0),
        row(verdict="not_run", watermark=None),
        RowAction.WRITE,
    ),
    ("equal watermark, other state", Derived("failed", EXEC, KEY, T1), row(), RowAction.WRITE),
]


@pytest.mark.parametrize(("case", "derived", "stored", "expected"), DECISIONS, ids=[c[0] for c in DECISIONS])
def test_decide_row(case, derived, stored, expected):
    assert decide_row(derived, stored, policy_version=3) is expected
