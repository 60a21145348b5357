"""What classifying posted results needs, in a constant number of queries."""

from __future__ import annotations

import json
from collections.abc import Iterable
from uuid import UUID

from fleet.burnin.tables import sql
from fleet.core.rows import bulk_read_cursor, id_text, ids_sql
from fleet.inventory.identity import Actor, site_restriction
from fleet.policies.selectors import load_resolutions
from fleet_rules.evaluations import ExecutionFacts, StoredResult

# Tuples, not model instances, and the ids as one text value: at 500 items the ORM's instances
# (two per row with the evaluation) and the client-side quoting of 500 bound UUIDs were most of
# this read's time (profiled). Driven by the posted ids and fenced (`OFFSET 0`), the plan is two
# primary-key probes per item however large the history; `id = ANY(…)` and a plain join both let
# the planner hash a sequential scan of every execution (seen at 30k executions).
_EXECUTIONS = sql(
    """
SELECT e.id, e.status, e.updated_at, e.site_id, e.requirement_id,
       r.execution_id IS NOT NULL, r.passed, r.reason, r.metric_evaluations, r.evaluation_source_key,
       r.execution_updated_at
FROM unnest({wanted}) AS wanted(id)
CROSS JOIN LATERAL (
    SELECT e.id, e.status, e.updated_at, e.site_id, e.requirement_id FROM {execution} e WHERE e.id = wanted.id OFFSET 0
) e
LEFT JOIN LATERAL (
    SELECT r.* FROM {evaluation} r WHERE r.execution_id = e.id OFFSET 0
) r ON true
""",
    wanted=ids_sql("%s"),
)


def load_facts(
    execution_ids: Iterable[UUID], actor: Actor
) -> tuple[dict[UUID, ExecutionFacts], dict[UUID, StoredResult]]:
    """The executions named (with what the caller may see of them) and their stored results."""
    ids = id_text(execution_ids)
    if not ids:
        return {}, {}
    with bulk_read_cursor() as cursor:
        cursor.execute(_EXECUTIONS, [ids])
        rows = cursor.fetchall()
    resolutions = load_resolutions({(row[4], row[3]) for row in rows})
    restricted = site_restriction(actor)
    facts, stored = {}, {}
    for (
        execution_id,
        status,
        updated_at,
        site_id,
        requirement_id,
        evaluated,
        passed,
        reason,
        metric_evaluations,
        source_key,
        evaluated_for,
    ) in rows:
        facts[execution_id] = ExecutionFacts(
            status=status,
            updated_at=updated_at,
            within_caller_site=restricted is None or restricted == site_id,
            current_key=resolutions[(requirement_id, site_id)].key,
        )
        if evaluated:
            stored[execution_id] = StoredResult(
                # Django has psycopg hand jsonb over as text (for JSONField decoders): decode it here.
                payload={"passed": passed, "reason": reason, "metric_evaluations": json.loads(metric_evaluations)},
                source_key=source_key,
                execution_updated_at=evaluated_for,
            )
    return facts, stored
