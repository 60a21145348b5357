"""Policy what-if: replay a target's deciding evidence against a candidate's thresholds with the
evaluator the agent uses (`fleet_rules.evaluator.evaluate`, the one implementation) and say
whether its verdict would flip, and through which rules."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from fleet_rules.evaluator import evaluate
from fleet_rules.evidence import RuleOutcome, rule_outcomes
from fleet_rules.vocabulary import Verdict

#: The verdicts a replay can move: those an evaluation decided. Errored stays errored (nothing
#: was measured), expired stays expired (age, not thresholds), the rest have no evidence.
REPLAYABLE: tuple[Verdict, ...] = (Verdict.PASSED, Verdict.FAILED)


@dataclass(frozen=True)
class Flip:
    before: Verdict
    after: Verdict
    rules: tuple[RuleOutcome, ...]  # the rules whose outcome moved (or that fail, for a new fail)


def replay(
    *,
    verdict: str,
    status: str,
    metrics: Mapping[str, Any],
    current_evaluations: Mapping[str, Any] | None,
    candidate_rules: Sequence[Mapping[str, Any]],
) -> Flip | None:
    """The flip a candidate's resolved rules would cause for one target, or None."""
    if verdict not in REPLAYABLE:
        return None
    payload = evaluate(status=status, metrics=metrics, rules=candidate_rules)
    after = Verdict.PASSED if payload["passed"] else Verdict.FAILED
    if after == verdict:
        return None
    before_outcomes = {(o.metric, o.statistic): o.passed for o in rule_outcomes(current_evaluations or {}, metrics)}
    moved = tuple(
        o
        for o in rule_outcomes(payload["metric_evaluations"], metrics)
        if before_outcomes.get((o.metric, o.statistic), not o.passed) != o.passed
        and (o.passed == (after == Verdict.PASSED))
    )
    return Flip(Verdict(verdict), after, moved)


def rule_json(outcome: RuleOutcome) -> dict[str, Any]:
    return {
        "metric": outcome.metric,
        "statistic": outcome.statistic,
        "value": outcome.value,
        "comparator": outcome.comparator,
        "threshold": outcome.threshold,
    }
