"""Phase 1: materialise the agents' evaluations, refusing any computed against thresholds or
execution data that have since changed.

Load (executions with their stored results, resolutions) → classify each item (pure) → one
guarded bulk upsert. The query count does not depend on the number of items.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from uuid import UUID

from django.db import connection, transaction
from django.utils import timezone
from psycopg.types.json import Jsonb

from fleet.burnin.models import ExecutionStatus, TestExecution
from fleet.core.principals import site_restriction
from fleet.policies.resolution import Resolution, load_resolutions


class Outcome(enum.StrEnum):
    INVALID = "invalid"
    STALE = "stale"
    UNCHANGED = "unchanged"
    WRITTEN = "written"


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
    within_caller_site: bool
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
        results = [metric.get("value_evaluation")] + list((metric.get("statistic_evaluations") or {}).values())
        if any(result is not None and not result.get("passed") for result in results):
            return True
    return False


def classify(item: ResultItem, execution: ExecutionFacts | None, stored: StoredResult | None) -> Outcome:
    """First match wins: invalid → stale → unchanged → written (DESIGN §4.1)."""
    if execution is None or not execution.within_caller_site:
        return Outcome.INVALID
    if execution.status == ExecutionStatus.RUNNING or contradicts_itself(item.payload):
        return Outcome.INVALID
    if item.expected_updated_at != execution.updated_at or item.source_key != execution.current_key:
        return Outcome.STALE
    if (
        stored is not None
        and stored.source_key == item.source_key
        and stored.execution_updated_at == item.expected_updated_at
        and stored.payload == normalised_payload(item.payload)
    ):
        return Outcome.UNCHANGED
    return Outcome.WRITTEN


@dataclass
class UpsertCounts:
    written: int = 0
    unchanged: int = 0
    stale: int = 0
    invalid: int = 0

    def add(self, outcome: Outcome, n: int = 1) -> None:
        setattr(self, outcome.value, getattr(self, outcome.value) + n)


def _load(item_ids: Iterable[UUID], actor: Any) -> tuple[dict[UUID, ExecutionFacts], dict[UUID, StoredResult]]:
    executions = list(
        TestExecution.objects.filter(id__in=list(item_ids))
        .select_related("evaluation")
        .only(
            "id",
            "status",
            "updated_at",
            "site_id",
            "requirement_id",
            "evaluation__passed",
            "evaluation__reason",
            "evaluation__metric_evaluations",
            "evaluation__evaluation_source_key",
            "evaluation__execution_updated_at",
        )
    )
    resolutions: dict[tuple[UUID, UUID], Resolution] = load_resolutions(
        {(e.requirement_id, e.site_id) for e in executions}
    )
    restricted = site_restriction(actor)
    facts, stored = {}, {}
    for e in executions:
        facts[e.id] = ExecutionFacts(
            status=e.status,
            updated_at=e.updated_at,
            within_caller_site=restricted is None or restricted == e.site_id,
            current_key=resolutions[(e.requirement_id, e.site_id)].key,
        )
        evaluation = getattr(e, "evaluation", None)
        if evaluation is not None:
            stored[e.id] = StoredResult(
                payload={
                    "passed": evaluation.passed,
                    "reason": evaluation.reason,
                    "metric_evaluations": evaluation.metric_evaluations,
                },
                source_key=evaluation.evaluation_source_key,
                execution_updated_at=evaluation.execution_updated_at,
            )
    return facts, stored


_UPSERT = """
INSERT INTO burnin_evaluationresult AS r
    (execution_id, passed, reason, metric_evaluations, evaluation_source_key, execution_updated_at, materialised_at)
SELECT * FROM unnest(%s::uuid[], %s::boolean[], %s::text[], %s::jsonb[], %s::varchar[], %s::timestamptz[],
                     %s::timestamptz[])
ON CONFLICT (execution_id) DO UPDATE SET
    passed = EXCLUDED.passed,
    reason = EXCLUDED.reason,
    metric_evaluations = EXCLUDED.metric_evaluations,
    evaluation_source_key = EXCLUDED.evaluation_source_key,
    execution_updated_at = EXCLUDED.execution_updated_at,
    materialised_at = EXCLUDED.materialised_at
WHERE r.execution_updated_at <= EXCLUDED.execution_updated_at
RETURNING execution_id
"""


def _write(items: list[ResultItem]) -> set[UUID]:
    """One statement for all items; a row whose stored result is for a newer
    `execution_updated_at` is left alone (returns the ids actually written)."""
    if not items:
        return set()
    now = timezone.now()
    payloads = [normalised_payload(item.payload) for item in items]
    with connection.cursor() as cursor:
        cursor.execute(
            _UPSERT,
            [
                [item.execution_id for item in items],
                [p["passed"] for p in payloads],
                [p["reason"] for p in payloads],
                [Jsonb(p["metric_evaluations"]) for p in payloads],
                [item.source_key for item in items],
                [item.expected_updated_at for item in items],
                [now] * len(items),
            ],
        )
        return {row[0] for row in cursor.fetchall()}


@transaction.atomic
def evaluation_results_upsert(*, items: list[ResultItem], actor: Any) -> UpsertCounts:
    facts, stored = _load((item.execution_id for item in items), actor)
    counts = UpsertCounts()
    to_write = []
    for item in items:
        outcome = classify(item, facts.get(item.execution_id), stored.get(item.execution_id))
        if outcome is Outcome.WRITTEN:
            to_write.append(item)
        else:
            counts.add(outcome)
    written = _write(to_write)
    counts.add(Outcome.WRITTEN, len(written))
    # Lost to a concurrent write for a newer execution_updated_at: this result is already stale.
    counts.add(Outcome.STALE, len(to_write) - len(written))
    return counts
