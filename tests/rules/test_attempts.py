"""Attempt history and `consecutive_passes`: the pure rules, by table."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from uuid import uuid4

import pytest

from fleet_rules.attempts import Attempt, PriorRun, require_consecutive, summarise
from fleet_rules.verdicts import Derived
from fleet_rules.vocabulary import Verdict

T0 = datetime(2026, 1, 1, tzinfo=UTC)
P, F, E, R = Verdict.PASSED, Verdict.FAILED, Verdict.ERRORED, None


@pytest.mark.parametrize(
    ("history", "attempts", "passed_after", "streak", "flaky"),
    [
        ([], 0, None, 0, False),
        ([P], 1, None, 1, False),
        ([F, F, P], 3, 3, 1, True),  # failed twice then passed: passed after 3 attempts
        ([F, F, P, P], 4, 3, 2, True),
        ([E, P], 2, 2, 1, True),
        ([P, F], 2, None, 0, True),
        ([F, F], 2, None, 0, False),
        ([F, R, P], 2, 2, 1, True),  # a running or unjudged attempt is not counted
    ],
)
def test_summarise(history, attempts, passed_after, streak, flaky):
    summary = summarise([Attempt("completed", v) for v in history])
    assert (summary.attempts, summary.passed_after, summary.consecutive_passes, summary.flaky) == (
        attempts,
        passed_after,
        streak,
        flaky,
    )


def passed(at=T0) -> Derived:
    return Derived(Verdict.PASSED, uuid4(), "k" * 64, at)


def prior(*verdicts, current=True):
    return [
        PriorRun("errored" if v == E else "completed", v == P, current, T0 - timedelta(seconds=i + 1))
        for i, v in enumerate(verdicts)
    ]


@pytest.mark.parametrize(
    ("k", "runs", "latest_counts", "expected"),
    [
        (1, [], True, Verdict.PASSED),
        (2, [], True, Verdict.NOT_RUN),
        (2, [P], True, Verdict.PASSED),
        (2, [F], True, Verdict.FAILED),
        (2, [E], True, Verdict.ERRORED),
        (3, [P], True, Verdict.NOT_RUN),
        (3, [P, F], True, Verdict.FAILED),
        (3, [P, P], True, Verdict.PASSED),
        (2, [P], False, Verdict.NOT_RUN),  # the latest predates the policy version
    ],
)
def test_require_consecutive(k, runs, latest_counts, expected):
    derived = require_consecutive(passed(), k=k, latest_counts=latest_counts, prior=prior(*runs))
    assert derived is not None and derived.verdict == expected


def test_a_needed_run_without_a_current_evaluation_defers():
    assert require_consecutive(passed(), k=2, latest_counts=True, prior=prior(P, current=False)) is None


def test_a_non_pass_latest_is_left_alone():
    failed = Derived(Verdict.FAILED, uuid4(), "k" * 64, T0)
    assert require_consecutive(failed, k=3, latest_counts=True, prior=[]) is failed
    assert require_consecutive(None, k=3, latest_counts=True, prior=[]) is None


def test_the_watermark_is_the_newest_evaluation_it_used():
    runs = [PriorRun("completed", True, True, T0 + timedelta(seconds=5))]
    derived = require_consecutive(passed(), k=2, latest_counts=True, prior=runs)
    assert derived is not None and derived.watermark == T0 + timedelta(seconds=5)
