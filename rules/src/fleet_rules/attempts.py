"""Attempts: a target's executions under the current policy version, what their verdicts say
together, and the `consecutive_passes` rule.

"Iterate until one pass" is how a fluctuating device gets accepted. A requirement may therefore
demand `K` consecutive passes: the target is `passed` only when its latest K finished executions
under the current policy version all passed. With fewer than K passing executions and no
failure among them the verdict is `not_run` (it has not been run enough); with a failure or an
error among them it is that verdict (the most recent one). `K = 1` is the plain rule of
`fleet_rules.verdicts`. Pure: the reconcile page loads the K − 1 runs before the latest in the
same query as the latest.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from enum import IntFlag
from typing import NamedTuple

from fleet_rules.verdicts import Derived
from fleet_rules.vocabulary import ExecutionStatus, Verdict


class PriorRun(NamedTuple):
    """A finished execution before the latest one, under the current policy version."""

    status: str
    passed: bool | None  # its evaluation's verdict
    current: bool  # evaluated for its `updated_at` and the current resolution
    materialised_at: datetime | None


def require_consecutive(
    derived: Derived | None, *, k: int, latest_counts: bool, prior: Sequence[PriorRun]
) -> Derived | None:
    """Apply `consecutive_passes = k` to the plain derivation of the latest execution.

    `latest_counts`: the latest execution was created under the current policy version; `prior`
    are the finished runs before it under that version, newest first (at least k − 1 when that
    many exist). None (deferred) when a run the decision needs has no current evaluation yet.
    """
    if derived is None or k <= 1 or derived.verdict != Verdict.PASSED:
        return derived
    if not latest_counts:
        return derived._replace(verdict=Verdict.NOT_RUN)
    needed = list(prior[: k - 1])
    watermark = derived.watermark
    for run in needed:
        if not run.current:
            return None
        if run.materialised_at is not None and (watermark is None or run.materialised_at > watermark):
            watermark = run.materialised_at
        if run.status == ExecutionStatus.ERRORED:
            return derived._replace(verdict=Verdict.ERRORED, watermark=watermark)
        if not run.passed:
            return derived._replace(verdict=Verdict.FAILED, watermark=watermark)
    if len(needed) < k - 1:
        return derived._replace(verdict=Verdict.NOT_RUN, watermark=watermark)
    return derived._replace(watermark=watermark)


@dataclass(frozen=True)
class Attempt:
    """One execution of a target as the attempt history shows it (oldest first)."""

    status: str
    verdict: Verdict | None  # None while running or not evaluated for the current resolution


@dataclass(frozen=True)
class AttemptSummary:
    attempts: int  # finished, judged attempts under the current version
    passed_after: int | None  # "passed after N attempts" when the latest passed after a non-pass
    consecutive_passes: int  # passes at the end of the history
    flaky: bool  # the verdict changed between attempts (under one policy version)


def judged(status: str, passed: bool | None) -> Verdict | None:
    if status == ExecutionStatus.RUNNING or passed is None:
        return None
    if status == ExecutionStatus.ERRORED:
        return Verdict.ERRORED
    return Verdict.PASSED if passed else Verdict.FAILED


class Outcomes(IntFlag):
    """The outcomes a target's counted attempts have had, one bit each: what the projection keeps
    per target (`PolicyProgress.outcomes`, written with the row) so a site's flaky rate and its
    passes after failures are read from the projection, not from every attempt of the site."""

    PASSED = 1
    FAILED = 2
    ERRORED = 4


def is_flaky(outcomes: int) -> bool:
    """More than one outcome among the attempts: the verdict changed between them (`summarise`)."""
    return outcomes & (outcomes - 1) != 0


def flaky_sql(outcomes: str) -> str:
    """`is_flaky` of the SQL integer expression `outcomes` (more than one bit set)."""
    return f"(({outcomes}) & (({outcomes}) - 1)) <> 0"


def not_passed(outcomes: int) -> bool:
    """A failure or an error among the attempts."""
    return bool(outcomes & (Outcomes.FAILED | Outcomes.ERRORED))


def not_passed_sql(outcomes: str) -> str:
    """`not_passed` of the SQL integer expression `outcomes`: every bit but `PASSED`, the lowest,
    is a failure or an error, so it is a comparison an index predicate can state."""
    return f"({outcomes}) >= {int(Outcomes.FAILED)}"


def summarise(attempts: Sequence[Attempt]) -> AttemptSummary:
    """What a target's attempt history says: how many judged attempts, whether the latest pass
    came after failures or errors (then "passed after N attempts", N counting every judged attempt
    up to and including that pass), the passes in a row at the end, and whether it is flaky."""
    verdicts = [a.verdict for a in attempts if a.verdict is not None]
    streak = 0
    for verdict in reversed(verdicts):
        if verdict != Verdict.PASSED:
            break
        streak += 1
    passed_after = None
    if verdicts and verdicts[-1] == Verdict.PASSED and streak < len(verdicts):
        passed_after = len(verdicts) - streak + 1
    flaky = len(set(verdicts)) > 1
    return AttemptSummary(len(verdicts), passed_after, streak, flaky)
