"""Fail-closed evaluation of an execution's metrics against its resolved threshold rules.

This is a pure function of its inputs so that the agent and anyone re-checking a result get the same
answer byte for byte (`payload_json`). It lives in the rules core so that the agent and the service
share one implementation, never a copy. The service stores the spec's
`BurnInEvaluationResultPayloadSchema` as it is posted, so that is exactly what `evaluate` returns.

Fail-closed means the hardware has to prove itself: a metric, value or statistic that is missing, NaN,
infinite, a boolean, or anything but a number where a number is compared fails its rule. A rule set that
does not make sense (an unknown comparator, a non-finite threshold, two rules for one metric and
statistic) is not the hardware's fault and cannot be written in the schema either, so it raises
`ValueError` instead of producing a verdict.
"""

from __future__ import annotations

import json
import math
import operator
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from fleet_rules.readable import COMPARATOR_SIGNS
from fleet_rules.vocabulary import Comparator, ExecutionStatus

__all__ = ["COMPARATORS", "evaluate", "payload_json"]

COMPARATORS: frozenset[str] = frozenset(Comparator.values)

_NUMERIC_TESTS: dict[str, Callable[[float, float], bool]] = {
    Comparator.GT: operator.gt,
    Comparator.LT: operator.lt,
    Comparator.EQ: operator.eq,
    Comparator.GTE: operator.ge,
    Comparator.LTE: operator.le,
}


def evaluate(
    *,
    status: str,
    metrics: Mapping[str, Any],
    rules: Sequence[Mapping[str, Any]],
    error: str | None = None,
) -> dict[str, Any]:
    """Judge one finished execution; the result passes only if every rule passed, and there is at
    least one rule (no thresholds at all fails: nothing vouches for the hardware).

    Metrics that are not an object at all count as none reported, so every rule fails as missing.
    An errored execution could not judge the hardware, so it gets `passed: false` with its error as the
    reason and no metric evaluations, whatever metrics it carries. A running one is not finished and has
    no verdict yet: asking for one is a caller bug (`ValueError`).
    """
    if status == ExecutionStatus.ERRORED:
        return {"passed": False, "reason": error or "the execution errored", "metric_evaluations": {}}
    if status == ExecutionStatus.RUNNING:
        raise ValueError("a running execution has no verdict yet; evaluate it once it has finished")
    if status != ExecutionStatus.COMPLETED:
        raise ValueError(f"unknown execution status {status!r}")

    if not isinstance(metrics, Mapping):
        metrics = {}
    checked = sorted((_checked_rule(rule) for rule in rules), key=_rule_order)
    _reject_duplicates(checked)

    failures: list[str] = []
    per_metric: dict[str, dict[str, Any]] = {}
    for metric, statistic, comparator, threshold in checked:
        why = _why_failed(metrics, metric, statistic, comparator, threshold)
        result = {"passed": why is None, "threshold": threshold, "comparator": comparator}
        if why is not None:
            failures.append(f"{_label(metric, statistic)}: {why}")
        entry = per_metric.setdefault(metric, {"passed": True, "value_evaluation": None, "statistic_evaluations": None})
        entry["passed"] = entry["passed"] and why is None
        if statistic is None:
            entry["value_evaluation"] = result
        else:
            if entry["statistic_evaluations"] is None:
                entry["statistic_evaluations"] = {}
            entry["statistic_evaluations"][statistic] = result

    if not checked:
        # Fail closed: a requirement with nothing to judge must not accept hardware untested.
        failures.append("no thresholds to judge against")
    return {
        "passed": not failures,
        "reason": "; ".join(failures) if failures else None,
        "metric_evaluations": per_metric,
    }


def payload_json(payload: Mapping[str, Any]) -> bytes:
    """The canonical bytes of a payload, so that equal verdicts compare equal as bytes too."""
    return json.dumps(payload, sort_keys=True, separators=(",", ":"), allow_nan=False).encode("utf-8")


_MAX_SHOWN = 80

_Rule = tuple[str, str | None, str, int | float | str]


def _checked_rule(rule: Mapping[str, Any]) -> _Rule:
    if not isinstance(rule, Mapping):
        raise ValueError(f"a threshold rule must be an object, not {type(rule).__name__}")
    metric = rule.get("metric")
    statistic = rule.get("statistic")
    comparator = rule.get("comparator")
    threshold = rule.get("threshold")
    if not isinstance(metric, str) or not metric:
        raise ValueError(f"a threshold rule needs a metric name: {dict(rule)!r}")
    if statistic is not None and (not isinstance(statistic, str) or not statistic):
        raise ValueError(f"statistic must be null or a name: {dict(rule)!r}")
    if comparator not in COMPARATORS:
        raise ValueError(f"unknown comparator {comparator!r} in rule for {metric}")
    if isinstance(threshold, bool) or not isinstance(threshold, int | float | str):
        raise ValueError(f"threshold must be a number or a string in rule for {metric}: {threshold!r}")
    if isinstance(threshold, float) and not math.isfinite(threshold):
        raise ValueError(f"threshold must be finite in rule for {metric}: {threshold!r}")
    return metric, statistic, comparator, threshold


def _rule_order(rule: _Rule) -> tuple[str, bool, str]:
    metric, statistic, _, _ = rule
    return metric, statistic is not None, statistic or ""


def _reject_duplicates(rules: list[_Rule]) -> None:
    seen: set[tuple[str, str | None]] = set()
    for metric, statistic, _, _ in rules:
        if (metric, statistic) in seen:
            raise ValueError(f"two threshold rules for {_label(metric, statistic)}; a resolution has one per slot")
        seen.add((metric, statistic))


def _label(metric: str, statistic: str | None) -> str:
    return metric if statistic is None else f"{metric}.{statistic}"


def _why_failed(
    metrics: Mapping[str, Any], metric: str, statistic: str | None, comparator: str, threshold: int | float | str
) -> str | None:
    """None when the rule passes, else the reason it failed, in words an operator can act on."""
    if isinstance(threshold, str) and comparator != Comparator.EQ:
        return "string thresholds compare only with eq"
    reported = metrics.get(metric)
    if reported is None:
        return "metric missing"
    if not isinstance(reported, Mapping):
        return "metric is not an object"
    if statistic is None:
        value = reported.get("value")
        if value is None:
            return "value missing"
    else:
        statistics = reported.get("statistics")
        if statistics is None:
            return "statistic missing"
        if not isinstance(statistics, Mapping):
            return "statistics is not an object"
        value = statistics.get(statistic)
        if value is None:
            return "statistic missing"

    if isinstance(threshold, str):
        if not isinstance(value, str):
            return f"type mismatch: {_show(value)} is not a string like the threshold {_show(threshold)}"
        return None if value == threshold else f"{_show(value)} is not {_sign(Comparator.EQ)} {_show(threshold)}"
    if isinstance(value, bool):
        return f"{_show(value)} is a boolean, not a number"
    if not isinstance(value, int | float):
        return f"{_show(value)} is not a number"
    if isinstance(value, float) and not math.isfinite(value):
        return f"{_show(value)} is not a finite number"
    if _NUMERIC_TESTS[comparator](value, threshold):
        return None
    return f"{_show(value)} is not {_sign(comparator)} {_show(threshold)}"


def _sign(comparator: str) -> str:
    """The comparator as every page writes it (`≥`), in the reason an evaluation stores."""
    return COMPARATOR_SIGNS.get(comparator, comparator)


def _show(value: Any) -> str:
    """A short, deterministic rendering of a reported value for a reason string (JSON-like)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        if math.isnan(value):
            return "NaN"
        if math.isinf(value):
            return "inf" if value > 0 else "-inf"
        return repr(value)
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str):
        return json.dumps(value if len(value) <= _MAX_SHOWN else value[: _MAX_SHOWN - 1] + "…")
    if isinstance(value, Mapping):
        return "an object"
    if isinstance(value, list | tuple):
        return "a list"
    return type(value).__name__
