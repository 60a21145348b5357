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
from typing import Any, NamedTuple
from uuid import UUID, uuid4

from django.core.exceptions import ValidationError
from django.db import connection
from django.utils.dateparse import parse_datetime

from fleet.burnin.tables import sql
from fleet.core.cursors import cursor_decode, cursor_encode
from fleet.core.statements import Statement
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


def _example(requirement_ids: list[UUID]) -> dict[str, Any]:
    """Parameters for the statement test: the first page of a satellite's feed."""
    return {
        "requirement_ids": requirement_ids,
        "keys": ["example" for _ in requirement_ids],
        "site_id": uuid4(),
        "finished": sorted(FINISHED_EXECUTION_STATUSES),
        "satellite_id": uuid4(),
        "after_at": None,
        "after_id": None,
        "limit": 2,
    }


_CURRENT_KEYS = """current_keys(requirement_id, source_key) AS (
    SELECT * FROM unnest(%(requirement_ids)s::uuid[], %(keys)s::varchar[])
)"""


class RefreshCounts(NamedTuple):
    """What a refresh did: requirements whose key moved, executions listed and dropped, keys recorded."""

    moved: int
    listed: int
    dropped: int
    recorded: int


#: Requirements whose current key at the site is not the one the work list was brought up to date
#: for: list their finished executions at the site that lack an evaluation for the new key, drop
#: the listed ones that have one (a key changed back), and record the key. The two writes touch
#: disjoint rows (they see the same snapshot). Nothing moved: nothing is written.
REFRESH = Statement(
    "burnin.pending_evaluation_feed.refresh",
    sql(
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
SELECT (SELECT count(*) FROM moved) AS moved, (SELECT count(*) FROM listed) AS listed,
       (SELECT count(*) FROM dropped) AS dropped, (SELECT count(*) FROM recorded) AS recorded
""",
        current_keys=_CURRENT_KEYS,
    ),
    RefreshCounts,
    # No requirement: nothing moved, nothing written (a requirement would be recorded for the site).
    example=lambda: _example([]),
)


class PendingRow(NamedTuple):
    id: UUID
    updated_at: datetime
    status: str
    requirement_id: UUID
    test: str
    device_id: UUID | None
    topology_id: UUID | None
    parameters: Any  # jsonb: text from Django's psycopg set-up (`_json`)
    metrics: Any
    error: str
    target_name: str


#: The page: the work list in (updated_at, id) order through its index, each row re-checked
#: against the execution and its evaluation (the list may hold a row a concurrent write has just
#: settled), filtered to the satellite's targets.
PAGE = Statement(
    "burnin.pending_evaluation_feed.page",
    sql(
        """
WITH {current_keys}
SELECT e.id, e.updated_at, e.status, e.requirement_id, e.test, e.device_id, e.topology_id,
       e.parameters, e.metrics, e.error, COALESCE(d.hostname, t.label) AS target_name
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
    ),
    PendingRow,
    example=lambda: _example([uuid4()]),
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
        REFRESH.one(db, params)
        fetched = PAGE.rows(db, params)
    has_more = len(fetched) > limit
    items = [
        PendingExecution(
            execution_id=row.id,
            updated_at=row.updated_at,
            status=row.status,
            requirement=requirements[row.requirement_id],
            test=row.test,
            device_id=row.device_id,
            topology_id=row.topology_id,
            parameters=_json(row.parameters),
            metrics=_json(row.metrics),
            error=row.error,
            resolution=resolutions[(row.requirement_id, satellite.site_id)],
            target_name=row.target_name,
        )
        for row in fetched[:limit]
    ]
    next_cursor = None
    if has_more and items:
        last = items[-1]
        next_cursor = cursor_encode(
            {"satellite": str(satellite.id), "at": last.updated_at.isoformat(), "id": str(last.execution_id)},
            purpose="pending",
        )
    return PendingPage(items=items, next_cursor=next_cursor)
