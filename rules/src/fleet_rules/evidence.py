"""What the evidence says, rule by rule: the measured value beside the threshold it was judged
against, and by how much it missed (or cleared) it.

An evaluation result records, per metric, whether each rule passed and its threshold and
comparator; the execution records the measured values. Put together they answer the operator's
question — *why* did this device fail: `hbm_bandwidth_tbps.min 2.932 < 3.6 (−18.6 %)`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

Number = int | float


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


@dataclass(frozen=True)
class RuleOutcome:
    """One threshold rule of one evaluation: what was measured, what it was compared with."""

    metric: str
    statistic: str | None
    comparator: str | None
    threshold: Number | str | None
    value: Number | str | None
    passed: bool

    @property
    def name(self) -> str:
        return f"{self.metric}.{self.statistic}" if self.statistic else self.metric

    @property
    def margin(self) -> float | None:
        """(value − threshold) / |threshold|: −0.186 is 18.6 % below; None when either is not a
        number, or the threshold is 0 (no relative distance to speak of)."""
        if not (_is_number(self.value) and _is_number(self.threshold)) or self.threshold == 0:
            return None
        assert isinstance(self.value, int | float) and isinstance(self.threshold, int | float)
        return (self.value - self.threshold) / abs(self.threshold)

    @property
    def relation(self) -> str:
        """How the value actually stands to the threshold: <, >, = or ≠ (`?` when unmeasured)."""
        if self.value is None:
            return "?"
        if _is_number(self.value) and _is_number(self.threshold):
            assert isinstance(self.value, int | float) and isinstance(self.threshold, int | float)
            return "<" if self.value < self.threshold else ">" if self.value > self.threshold else "="
        return "=" if self.value == self.threshold else "≠"

    def describe(self, unit: str = "") -> str:
        """`hbm_bandwidth_tbps.min 2.932 TB/s is below ≥ 3.6 TB/s (−18.6 %)`, or `… missing (needs ≥ 3.6 TB/s)`:
        the one wording of a rule's outcome (`fleet_rules.readable.outcome_text`), for terminals as for pages."""
        from fleet_rules.readable import outcome_text  # readable reads this module's RuleOutcome

        return outcome_text(self, unit)


def _show(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


def measured(metrics: Mapping[str, Any], metric: str, statistic: str | None) -> Number | str | None:
    """The value a rule compares: the metric's `value`, or one of its `statistics`."""
    reading = metrics.get(metric)
    if not isinstance(reading, Mapping):
        return None
    if statistic is None:
        value = reading.get("value")
    else:
        statistics = reading.get("statistics")
        value = statistics.get(statistic) if isinstance(statistics, Mapping) else None
    return value if isinstance(value, int | float | str) and not isinstance(value, bool) else None


def rule_outcomes(metric_evaluations: Mapping[str, Any], metrics: Mapping[str, Any]) -> list[RuleOutcome]:
    """Every rule of an evaluation with its measured value, failing rules first, then by name."""
    outcomes = []
    for metric, evaluation in (metric_evaluations or {}).items():
        if not isinstance(evaluation, Mapping):
            continue
        results: list[tuple[str | None, Any]] = [(None, evaluation.get("value_evaluation"))]
        results += list((evaluation.get("statistic_evaluations") or {}).items())
        for statistic, result in results:
            if not isinstance(result, Mapping):
                continue
            outcomes.append(
                RuleOutcome(
                    metric=metric,
                    statistic=statistic,
                    comparator=result.get("comparator"),
                    threshold=result.get("threshold"),
                    value=measured(metrics, metric, statistic),
                    passed=bool(result.get("passed")),
                )
            )
    return sorted(outcomes, key=lambda o: (o.passed, o.name))


def failing_rules(metric_evaluations: Mapping[str, Any], metrics: Mapping[str, Any]) -> list[RuleOutcome]:
    return [outcome for outcome in rule_outcomes(metric_evaluations, metrics) if not outcome.passed]
