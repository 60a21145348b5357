"""The guarded bulk upsert of evaluation results: a stored result for a newer
`execution_updated_at` is never replaced by an older one."""

from __future__ import annotations

from uuid import UUID

from django.db import connection
from django.utils import timezone
from psycopg.types.json import Jsonb

from fleet.burnin.tables import sql
from fleet_rules.evaluations import ResultItem, normalised_payload

_UPSERT = sql("""
INSERT INTO {evaluation} AS r
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
""")


def write_results(items: list[ResultItem]) -> set[UUID]:
    """One statement for all items; returns the ids actually written (a row that lost the guard
    to a concurrent write for a newer `execution_updated_at` is not among them)."""
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
