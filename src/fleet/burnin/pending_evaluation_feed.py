"""The pending-evaluation feed (phase 1's input): finished executions of one satellite's targets that lack a
current evaluation (none, one for another source key, or one for another `updated_at`).

A page reads the work list `PendingEvaluation` (kept by database triggers as executions finish and
evaluations arrive), never the site's execution history: its cost follows what is pending. Two
queries per page whatever the fleet size: the current source key of every requirement at the site
is computed first (policies are small) and sent as arrays; the first statement re-lists the
executions of any requirement whose key moved since the work list last saw it (a threshold change:
once per change), the second reads the page.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from uuid import UUID

from django.core.exceptions import ValidationError
from django.db import connection
from django.utils.dateparse import parse_datetime

from fleet.burnin.tables import sql
from fleet.core.cursors import cursor_decode, cursor_encode
from fleet.inventory.models import Satellite
from fleet.policies.models import Requirement
from fleet.policies.selectors import load_resolutions
from fleet_rules.resolution import Resolution
from fleet_rules.vocabulary import FINISHED_EXECUTION_STATUSES


@dataclass(frozen=True)
class PendingExecution:
    execution_id: UUID
    updated_at: datetime
    status: str
    requirement: str
    test: str
    device_id: UUID | None
    topology_id: UUID | None
    parameters: dict[str, Any]
    metrics: dict[str, Any]
    error: str
    resolution: Resolution
    target_name: str


@dataclass(frozen=True)
class PendingPage:
    items: list[PendingExecution]
    next_cursor: str | None


_CURRENT_KEYS = """current_keys(requirement_id, source_key) AS (
    SELECT * FROM unnest(%(requirement_ids)s::uuid[], %(keys)s::varchar[])
)"""

#: Requirements whose current key at the site is not the one the work list was brought up to date
#: for: list their finished executions at the site that lack an evaluation for the new key, drop
#: the listed ones that have one (a key changed back), and record the key. The two writes touch
#: disjoint rows (they see the same snapshot). Nothing moved: nothing is written.
_REFRESH = sql(
    """
WITH {current_keys}, moved AS (
    SELECT c.requirement_id, c.source_key FROM current_keys c
    LEFT JOIN {pending_key} k ON k.requirement_id = c.requirement_id AND k.site_id = %(site_id)s
    WHERE k.source_key IS DISTINCT FROM c.source_key
), listed AS (
    INSERT INTO {pending} (execution_id, site_id, requirement_id, updated_at)
    SELECT e.id, e.site_id, e.requirement_id, e.updated_at
    FROM {execution} e JOIN moved m ON m.requirement_id = e.requirement_id
    LEFT JOIN {evaluation} r ON r.execution_id = e.id
    WHERE e.site_id = %(site_id)s AND e.status = ANY(%(finished)s)
      AND (r.execution_id IS NULL OR r.evaluation_source_key <> m.source_key OR r.execution_updated_at <> e.updated_at)
    ON CONFLICT (execution_id) DO NOTHING
    RETURNING 1
), dropped AS (
    DELETE FROM {pending} w USING moved m, {evaluation} r, {execution} e
    WHERE w.site_id = %(site_id)s AND w.requirement_id = m.requirement_id AND r.execution_id = w.execution_id
      AND e.id = w.execution_id AND r.evaluation_source_key = m.source_key AND r.execution_updated_at = e.updated_at
    RETURNING 1
), recorded AS (
    INSERT INTO {pending_key} (requirement_id, site_id, source_key)
    SELECT requirement_id, %(site_id)s, source_key FROM moved
    ON CONFLICT (requirement_id, site_id) DO UPDATE SET source_key = EXCLUDED.source_key
    RETURNING 1
)
SELECT (SELECT count(*) FROM moved), (SELECT count(*) FROM listed), (SELECT count(*) FROM dropped),
       (SELECT count(*) FROM recorded)
""",
    current_keys=_CURRENT_KEYS,
)

#: The page: the work list in (updated_at, id) order through its index, each row re-checked
#: against the execution and its evaluation (the list may hold a row a concurrent write has just
#: settled), filtered to the satellite's targets.
_PAGE = sql(
    """
WITH {current_keys}
SELECT e.id, e.updated_at, e.status, e.requirement_id, e.test, e.device_id, e.topology_id,
       e.parameters, e.metrics, e.error, COALESCE(d.hostname, t.label)
FROM {pending} w
JOIN {execution} e ON e.id = w.execution_id
JOIN current_keys k ON k.requirement_id = e.requirement_id
LEFT JOIN {device} d ON d.id = e.device_id
LEFT JOIN {topology} t ON t.id = e.topology_id
LEFT JOIN {evaluation} r ON r.execution_id = e.id
WHERE w.site_id = %(site_id)s
  AND e.status = ANY(%(finished)s)
  AND (d.satellite_id = %(satellite_id)s OR t.satellite_id = %(satellite_id)s)
  AND (r.execution_id IS NULL
       OR r.evaluation_source_key <> k.source_key
       OR r.execution_updated_at <> e.updated_at)
  AND (%(after_at)s::timestamptz IS NULL
       OR (w.updated_at, w.execution_id) > (%(after_at)s::timestamptz, %(after_id)s::uuid))
ORDER BY w.updated_at, w.execution_id
LIMIT %(limit)s
""",
    current_keys=_CURRENT_KEYS,
)


def _json(value: Any) -> Any:
    # Django hands jsonb to psycopg as text so JSONField can decode it; raw queries must too.
    return json.loads(value) if isinstance(value, str) else value


def _resume_after(satellite: Satellite, cursor: str | None) -> tuple[datetime, UUID] | None:
    if not cursor:
        return None
    payload = cursor_decode(cursor, purpose="pending", restart_hint="Start again without a cursor.")
    if payload.get("satellite") != str(satellite.id):
        raise ValidationError({"cursor": ["This cursor belongs to another satellite's feed."]})
    at = parse_datetime(payload["at"])
    assert at is not None  # we signed it
    return at, UUID(payload["id"])


def pending_evaluations_page(*, satellite: Satellite, limit: int, cursor: str | None = None) -> PendingPage:
    """One page of the feed; `cursor` (signed, bound to this satellite) resumes after the last
    execution of the previous page."""
    after = _resume_after(satellite, cursor)
    requirements = dict(Requirement.objects.values_list("id", "name"))
    resolutions = load_resolutions((requirement_id, satellite.site_id) for requirement_id in requirements)
    ids = list(requirements)
    params: dict[str, Any] = {
        "requirement_ids": ids,
        "keys": [resolutions[(rid, satellite.site_id)].key for rid in ids],
        "site_id": satellite.site_id,
        "finished": sorted(FINISHED_EXECUTION_STATUSES),
        "satellite_id": satellite.id,
        "after_at": after[0] if after else None,
        "after_id": after[1] if after else None,
        "limit": limit + 1,
    }
    with connection.cursor() as db:
        db.execute(_REFRESH, params)
        db.execute(_PAGE, params)
        rows = db.fetchall()
    has_more = len(rows) > limit
    rows = rows[:limit]
    items = [
        PendingExecution(
            execution_id=row[0],
            updated_at=row[1],
            status=row[2],
            requirement=requirements[row[3]],
            test=row[4],
            device_id=row[5],
            topology_id=row[6],
            parameters=_json(row[7]),
            metrics=_json(row[8]),
            error=row[9],
            resolution=resolutions[(row[3], satellite.site_id)],
            target_name=row[10],
        )
        for row in rows
    ]
    next_cursor = None
    if has_more and items:
        last = items[-1]
        next_cursor = cursor_encode(
            {"satellite": str(satellite.id), "at": last.updated_at.isoformat(), "id": str(last.execution_id)},
            purpose="pending",
        )
    return PendingPage(items=items, next_cursor=next_cursor)
