"""The per-item decision of the upsert (`fleet_rules.evaluations`), without a database: first match
wins. (Moved from tests/burnin/test_classify.py.)"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from uuid import uuid4

import pytest

from fleet_rules.evaluations import ExecutionFacts, ResultItem, StoredResult, classify, normalised_payload
from fleet_rules.vocabulary import EvaluationOutcome as Outcome
from tests.payloads import failing_payload, passing_payload

T1 = datetime(2026, 11, 30, 10, 0, tzinfo=UTC)
T2 = T1 + timedelta(microseconds=1)
KEY, OTHER_KEY = "a" * 64, "b" * 64


def facts(status="completed", updated_at=T1, within=True, key=KEY):
    return ExecutionFacts(status=status, updated_at=updated_at, within_reach=within, current_key=key)


def item(payload=None, key=KEY, at=T1):
    return ResultItem(uuid4(), payload or passing_payload(), key, at)


def stored(payload=None, key=KEY, at=T1):
    return StoredResult(normalised_payload(payload or passing_payload()), key, at)


CONTRADICTION = failing_payload() | {"passed": True}

CASES = [
    ("unknown execution", item(), None, None, Outcome.INVALID),
    ("outside the caller's site", item(), facts(within=False), None, Outcome.INVALID),
    ("still running", item(), facts(status="running"), None, Outcome.INVALID),
    ("passed while a metric failed", item(CONTRADICTION), facts(), None, Outcome.INVALID),
    ("invalid beats stale", item(CONTRADICTION, key=OTHER_KEY), facts(), None, Outcome.INVALID),
    ("execution changed since read", item(at=T1), facts(updated_at=T2), None, Outcome.STALE),
    ("thresholds changed since read", item(key=OTHER_KEY), facts(), None, Outcome.STALE),
    ("stale beats unchanged", item(key=OTHER_KEY), facts(), stored(key=OTHER_KEY), Outcome.STALE),
    ("same key, version and payload", item(), facts(), stored(), Outcome.UNCHANGED),
    ("errored execution evaluated", item(failing_payload()), facts(status="errored"), None, Outcome.WRITTEN),
    ("nothing stored yet", item(), facts(), None, Outcome.WRITTEN),
    ("stored for an older version", item(at=T2), facts(updated_at=T2), stored(at=T1), Outcome.WRITTEN),
    ("stored for another key", item(), facts(), stored(key=OTHER_KEY), Outcome.WRITTEN),
    ("stored with another payload", item(failing_payload()), facts(), stored(), Outcome.WRITTEN),
]


@pytest.mark.parametrize(("case", "result_item", "execution", "existing", "expected"), CASES, ids=[c[0] for c in CASES])
def test_classification(case, result_item, execution, existing, expected):
    assert classify(result_item, execution, existing) is expected


def test_missing_optional_parts_compare_equal_to_explicit_empties():
    bare = {"passed": True}
    assert classify(item(bare), facts(), stored({"passed": True, "reason": None, "metric_evaluations": {}})) is (
        Outcome.UNCHANGED
    )
