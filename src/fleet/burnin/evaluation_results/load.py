"""What classifying posted results needs, in a constant number of queries."""

from __future__ import annotations

import json
from collections.abc import Iterable
from datetime import datetime
from typing import NamedTuple
from uuid import UUID, uuid4

from fleet.burnin.tables import sql
from fleet.core.rows import bulk_read_cursor, id_text, ids_sql
from fleet.core.statements import Statement
from fleet.inventory.identity import Actor, reach
from fleet.policies.selectors import load_resolutions
from fleet_rules.evaluations import ExecutionFacts, StoredResult


class ExecutionWithResult(NamedTuple):
    """A posted execution and, when one is stored, its evaluation (`evaluated`)."""

    id: UUID
    status: str
    updated_at: datetime
    site_id: UUID
    requirement_id: UUID
    serving_satellite_id: UUID  # the satellite managing its device or topology (whose agent may judge it)
    evaluated: bool
    passed: bool | None
    reason: str | None
    metric_evaluations: str | None  # jsonb, as text (Django's psycopg set-up)
    evaluation_source_key: str | None
    execution_updated_at: datetime | None


# Tuples, not model instances, and the ids as one text value: at 500 items the ORM's instances
# (two per row with the evaluation) and the client-side quoting of 500 bound UUIDs were most of
# this read's time (profiled). Driven by the posted ids and fenced (`OFFSET 0`), the plan is two
# primary-key probes per item however large the history; `id = ANY(…)` and a plain join both let
# the planner hash a sequential scan of every execution (seen at 30k executions).
EXECUTIONS = Statement(
    "burnin.evaluation_results.executions",
    sql(
        """
SELECT e.id, e.status, e.updated_at, e.site_id, e.requirement_id, e.serving_satellite_id,
       r.execution_id IS NOT NULL AS evaluated, r.passed, r.reason, r.metric_evaluations, r.evaluation_source_key,
       r.execution_updated_at
FROM unnest({wanted}) AS wanted(id)
CROSS JOIN LATERAL (
    SELECT e.id, e.status, e.updated_at, e.site_id, e.requirement_id,
           COALESCE(
               (SELECT d.satellite_id FROM {device} d WHERE d.id = e.device_id),
               (SELECT t.satellite_id FROM {topology} t WHERE t.id = e.topology_id)
           ) AS serving_satellite_id
    FROM {execution} e WHERE e.id = wanted.id OFFSET 0
) e
LEFT JOIN LATERAL (
    SELECT r.* FROM {evaluation} r WHERE r.execution_id = e.id OFFSET 0
) r ON true
""",
        wanted=ids_sql("%(ids)s"),
    ),
    ExecutionWithResult,
    example=lambda: {"ids": id_text([uuid4(), uuid4()])},
)


def load_facts(
    execution_ids: Iterable[UUID], actor: Actor
) -> tuple[dict[UUID, ExecutionFacts], dict[UUID, StoredResult]]:
    """The executions named (with what the caller may see of them) and their stored results."""
    ids = id_text(execution_ids)
    if not ids:
        return {}, {}
    with bulk_read_cursor() as cursor:
        rows = EXECUTIONS.rows(cursor, {"ids": ids})
    resolutions = load_resolutions({(row.requirement_id, row.site_id) for row in rows})
    where = reach(actor)
    facts, stored = {}, {}
    for row in rows:
        facts[row.id] = ExecutionFacts(
            status=row.status,
            updated_at=row.updated_at,
            within_reach=where.sees_site(row.site_id) and where.writes_for(row.serving_satellite_id),
            current_key=resolutions[(row.requirement_id, row.site_id)].key,
        )
        if row.evaluated:
            # An evaluation's columns are NOT NULL: present whenever there is one.
            assert row.metric_evaluations is not None and row.evaluation_source_key is not None
            assert row.execution_updated_at is not None
            stored[row.id] = StoredResult(
                # Django has psycopg hand jsonb over as text (for JSONField decoders): decode it here.
                payload={
                    "passed": row.passed,
                    "reason": row.reason,
                    "metric_evaluations": json.loads(row.metric_evaluations),
                },
                source_key=row.evaluation_source_key,
                execution_updated_at=row.execution_updated_at,
            )
    return facts, stored
