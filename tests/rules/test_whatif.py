"""What-if replay by table: only judged verdicts move, through the agent's evaluator."""

from __future__ import annotations

import pytest

from fleet_rules.evaluator import evaluate
from fleet_rules.vocabulary import Verdict
from fleet_rules.whatif import replay, rule_json

METRICS = {"bw": {"value": 3.2, "statistics": {"min": 3.1}}}
OLD = [{"metric": "bw", "statistic": "min", "comparator": "gte", "threshold": 3.0}]
NEW = [{"metric": "bw", "statistic": "min", "comparator": "gte", "threshold": 3.4}]


def current(rules):
    return evaluate(status="completed", metrics=METRICS, rules=rules)["metric_evaluations"]


def test_a_tightened_rule_flips_a_pass_and_names_the_rule():
    flip = replay(
        verdict=Verdict.PASSED,
        status="completed",
        metrics=METRICS,
        current_evaluations=current(OLD),
        candidate_rules=NEW,
    )
    assert (flip.before, flip.after) == (Verdict.PASSED, Verdict.FAILED)
    assert [rule_json(r) for r in flip.rules] == [
        {"metric": "bw", "statistic": "min", "value": 3.1, "comparator": "gte", "threshold": 3.4}
    ]


def test_a_loosened_rule_flips_a_fail_and_an_unchanged_outcome_is_no_flip():
    flip = replay(
        verdict=Verdict.FAILED,
        status="completed",
        metrics=METRICS,
        current_evaluations=current(NEW),
        candidate_rules=OLD,
    )
    assert (flip.before, flip.after) == (Verdict.FAILED, Verdict.PASSED)
    assert [r.threshold for r in flip.rules] == [3.0]
    assert (
        replay(
            verdict=Verdict.PASSED, status="completed", metrics=METRICS, current_evaluations=None, candidate_rules=OLD
        )
        is None
    )


@pytest.mark.parametrize("verdict", [Verdict.ERRORED, Verdict.EXPIRED, Verdict.NOT_RUN, Verdict.IN_PROGRESS])
def test_verdicts_no_evaluation_decided_are_not_replayed(verdict):
    assert (
        replay(verdict=verdict, status="completed", metrics=METRICS, current_evaluations=None, candidate_rules=NEW)
        is None
    )


def test_a_missing_metric_fails_closed_under_the_candidate():
    flip = replay(
        verdict=Verdict.PASSED,
        status="completed",
        metrics={},
        current_evaluations=None,
        candidate_rules=NEW,
    )
    assert flip.after == Verdict.FAILED and flip.rules[0].value is None
