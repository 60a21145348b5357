"""Phase 1's rule: what to do with one evaluation result an agent posts.

First match wins: **invalid** (unknown execution, outside the caller's site, still running, or a
payload that contradicts itself) → **stale** (computed for another `updated_at` or another
threshold resolution) → **unchanged** (the stored result is this one) → **written**.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from uuid import UUID

from fleet_rules.vocabulary import EvaluationOutcome, ExecutionStatus


@dataclass(frozen=True)
class ResultItem:
    execution_id: UUID
    payload: Mapping[str, Any]
    source_key: str
    expected_updated_at: datetime


@dataclass(frozen=True)
class ExecutionFacts:
    status: str
    updated_at: datetime
    within_reach: bool  # the caller may judge it (a satellite: an execution of what it serves)
    current_key: str


@dataclass(frozen=True)
class StoredResult:
    payload: Mapping[str, Any]
    source_key: str
    execution_updated_at: datetime


def normalised_payload(payload: Mapping[str, Any]) -> dict[str, Any]:
    """The payload as stored: absent optional parts made explicit, so equal means equal."""
    return {
        "passed": bool(payload["passed"]),
        "reason": payload.get("reason"),
        "metric_evaluations": dict(payload.get("metric_evaluations") or {}),
    }


def contradicts_itself(payload: Mapping[str, Any]) -> bool:
    """`passed: true` while a metric (or one of its threshold results) failed."""
    if not payload.get("passed"):
        return False
    for metric in (payload.get("metric_evaluations") or {}).values():
        if not metric.get("passed"):
            return True
        results = [metric.get("value_evaluation"), *(metric.get("statistic_evaluations") or {}).values()]
        if any(result is not None and not result.get("passed") for result in results):
            return True
    return False


def classify(item: ResultItem, execution: ExecutionFacts | None, stored: StoredResult | None) -> EvaluationOutcome:
    if execution is None or not execution.within_reach:
        return EvaluationOutcome.INVALID
    if execution.status == ExecutionStatus.RUNNING or contradicts_itself(item.payload):
        return EvaluationOutcome.INVALID
    if item.expected_updated_at != execution.updated_at or item.source_key != execution.current_key:
        return EvaluationOutcome.STALE
    if (
        stored is not None
        and stored.source_key == item.source_key
        and stored.execution_updated_at == item.expected_updated_at
        and stored.payload == normalised_payload(item.payload)
    ):
        return EvaluationOutcome.UNCHANGED
    return EvaluationOutcome.WRITTEN


@dataclass
class UpsertCounts:
    """The response's four counters; they always sum to the number of items posted."""

    written: int = 0
    unchanged: int = 0
    stale: int = 0
    invalid: int = 0

    def add(self, outcome: EvaluationOutcome, n: int = 1) -> None:
        setattr(self, outcome.value, getattr(self, outcome.value) + n)
