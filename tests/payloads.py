"""Evaluation-result payloads as the agent's evaluator writes them (plain data: no Django)."""

from __future__ import annotations


def passing_payload(metric: str = "diag_failed_tests", threshold=0, comparator: str = "eq") -> dict:
    return {
        "passed": True,
        "reason": None,
        "metric_evaluations": {
            metric: {
                "passed": True,
                "value_evaluation": {"passed": True, "threshold": threshold, "comparator": comparator},
                "statistic_evaluations": None,
            }
        },
    }


def failing_payload(metric: str = "diag_failed_tests", threshold=0, comparator: str = "eq") -> dict:
    return {
        "passed": False,
        "reason": f"{metric}: 2 is not {comparator} {threshold}",
        "metric_evaluations": {
            metric: {
                "passed": False,
                "value_evaluation": {"passed": False, "threshold": threshold, "comparator": comparator},
                "statistic_evaluations": None,
            }
        },
    }
