"""The guarded bulk upsert of evaluation results: a stored result for a newer
`execution_updated_at` is never replaced by an older one. The batch travels as one JSON document
(`fleet.core.rows.recordset`)."""

from __future__ import annotations

from typing import NamedTuple
from uuid import UUID

from django.db import connection
from django.utils import timezone

from fleet.burnin.tables import sql
from fleet.core.rows import recordset
from fleet.core.statements import Statement
from fleet_rules.evaluations import ResultItem, normalised_payload


class WrittenResult(NamedTuple):
    execution_id: UUID


UPSERT = Statement(
    "burnin.evaluation_results.upsert",
    sql("""
INSERT INTO {evaluation} AS r
    (execution_id, passed, reason, metric_evaluations, evaluation_source_key, execution_updated_at, materialised_at)
SELECT b.execution_id, b.passed, b.reason, b.metric_evaluations, b.evaluation_source_key, b.execution_updated_at,
       %(materialised_at)s::timestamptz
FROM jsonb_to_recordset(%(results)s::jsonb) AS b(execution_id uuid, passed boolean, reason text,
                                                 metric_evaluations jsonb, evaluation_source_key varchar(64),
                                                 execution_updated_at timestamptz)
ON CONFLICT (execution_id) DO UPDATE SET
    passed = EXCLUDED.passed,
    reason = EXCLUDED.reason,
    metric_evaluations = EXCLUDED.metric_evaluations,
    evaluation_source_key = EXCLUDED.evaluation_source_key,
    execution_updated_at = EXCLUDED.execution_updated_at,
    materialised_at = EXCLUDED.materialised_at
WHERE r.execution_updated_at <= EXCLUDED.execution_updated_at
RETURNING execution_id
"""),
    WrittenResult,
    example=lambda: {"materialised_at": timezone.now(), "results": "[]"},
)


def _row(item: ResultItem) -> dict[str, object]:
    payload = normalised_payload(item.payload)
    return {
        "execution_id": str(item.execution_id),
        "passed": payload["passed"],
        "reason": payload["reason"],
        "metric_evaluations": payload["metric_evaluations"],
        "evaluation_source_key": item.source_key,
        "execution_updated_at": item.expected_updated_at.isoformat(),
    }


def write_results(items: list[ResultItem]) -> set[UUID]:
    """One statement for all items; returns the ids actually written (a row that lost the guard
    to a concurrent write for a newer `execution_updated_at` is not among them)."""
    if not items:
        return set()
    with connection.cursor() as cursor:
        written = UPSERT.rows(
            cursor, {"materialised_at": timezone.now(), "results": recordset(_row(item) for item in items)}
        )
    return {row.execution_id for row in written}
