"""Rule outcomes with their measured values and margins (`fleet_rules.evidence`) and the plain-words
vocabulary (`fleet_rules.explanations`), no database."""

from __future__ import annotations

import pytest

from fleet_rules.evidence import RuleOutcome, failing_rules, measured, rule_outcomes
from fleet_rules.explanations import EXCLUSION_EXPLANATIONS, SKIP_EXPLANATIONS, VERDICT_SIGNS
from fleet_rules.vocabulary import ExclusionReason, SkipReason, Verdict

METRICS = {
    "hbm_bandwidth_tbps": {"value": 3.1, "unit": "TB/s", "statistics": {"min": 2.932, "mean": 3.3}},
    "diag_failed_tests": {"value": 2},
}
EVALUATIONS = {
    "hbm_bandwidth_tbps": {
        "passed": False,
        "value_evaluation": None,
        "statistic_evaluations": {
            "min": {"passed": False, "threshold": 3.6, "comparator": "gte"},
            "mean": {"passed": True, "threshold": 3.0, "comparator": "gte"},
        },
    },
    "diag_failed_tests": {
        "passed": False,
        "value_evaluation": {"passed": False, "threshold": 0, "comparator": "eq"},
        "statistic_evaluations": None,
    },
    "busbw_gbps": {
        "passed": False,
        "value_evaluation": {"passed": False, "threshold": 350, "comparator": "gte"},
        "statistic_evaluations": None,
    },
}


def test_a_failing_statistic_reads_as_the_operator_wants_it():
    (hbm,) = [o for o in failing_rules(EVALUATIONS, METRICS) if o.metric == "hbm_bandwidth_tbps"]
    assert hbm.describe() == "hbm_bandwidth_tbps.min 2.932 is below ≥ 3.6 (−18.6 %)"
    assert hbm.margin == pytest.approx(-0.18555, abs=1e-4)


def test_a_zero_threshold_has_no_margin_and_a_missing_value_says_so():
    by_name = {o.name: o for o in rule_outcomes(EVALUATIONS, METRICS)}
    assert by_name["diag_failed_tests"].describe() == "diag_failed_tests 2 is above = 0"
    assert by_name["diag_failed_tests"].margin is None
    assert by_name["busbw_gbps"].describe() == "busbw_gbps missing (needs ≥ 350)"


def test_failing_rules_come_first_and_passing_ones_are_kept():
    outcomes = rule_outcomes(EVALUATIONS, METRICS)
    assert [o.passed for o in outcomes] == [False, False, False, True]
    assert [o.name for o in failing_rules(EVALUATIONS, METRICS)] == [
        "busbw_gbps",
        "diag_failed_tests",
        "hbm_bandwidth_tbps.min",
    ]
    assert outcomes[-1].describe() == "hbm_bandwidth_tbps.mean 3.3 is above ≥ 3 (+10.0 %)"


@pytest.mark.parametrize(
    ("value", "threshold", "relation"),
    [(1, 2, "<"), (2, 1, ">"), (2, 2, "="), ("A100", "H100", "≠"), ("H100", "H100", "=")],
)
def test_relation(value, threshold, relation):
    assert RuleOutcome("m", None, "eq", threshold, value, False).relation == relation


def test_measured_values_that_are_not_numbers_or_strings_count_as_missing():
    assert measured({"m": {"value": True}}, "m", None) is None
    assert measured({"m": {"statistics": None}}, "m", "min") is None
    assert measured({"m": 5}, "m", None) is None
    assert measured({}, "m", None) is None


def test_every_verdict_has_a_symbol_and_every_reason_an_explanation():
    assert set(VERDICT_SIGNS) == set(Verdict)
    assert len({symbol for symbol, _ in VERDICT_SIGNS.values()}) == len(Verdict)
    assert set(SKIP_EXPLANATIONS) == set(SkipReason)
    assert set(EXCLUSION_EXPLANATIONS) == set(ExclusionReason)
