"""Reconcile's writes: the guarded upsert of a page, and the end-of-sweep cleanup."""

from __future__ import annotations

import logging
from typing import Any
from uuid import UUID

from django.conf import settings
from django.db import connection
from django.utils import timezone

from fleet.burnin.reconcile.load import SCOPE_DEVICE, SCOPE_TOPOLOGY, ReconcileScope, TargetRow, scope_params
from fleet.burnin.tables import sql
from fleet_rules.verdicts import Derived

logger = logging.getLogger("fleet.reconcile")

_UPSERT = sql("""
INSERT INTO {progress} AS p
    (site_id, satellite_id, resource_class, requirement_id, gate, device_id, topology_id, target_id, verdict,
     execution_id, evaluation_source_key, policy_version, watermark, reconciled_at, created_at)
SELECT * FROM unnest(%s::uuid[], %s::uuid[], %s::varchar[], %s::uuid[], %s::varchar[], %s::uuid[], %s::uuid[],
                     %s::uuid[], %s::varchar[], %s::uuid[], %s::varchar[], %s::integer[], %s::timestamptz[],
                     %s::timestamptz[], %s::timestamptz[])
ON CONFLICT (requirement_id, target_id) DO UPDATE SET
    site_id = EXCLUDED.site_id,
    satellite_id = EXCLUDED.satellite_id,
    resource_class = EXCLUDED.resource_class,
    gate = EXCLUDED.gate,
    verdict = EXCLUDED.verdict,
    execution_id = EXCLUDED.execution_id,
    evaluation_source_key = EXCLUDED.evaluation_source_key,
    policy_version = EXCLUDED.policy_version,
    watermark = EXCLUDED.watermark,
    reconciled_at = EXCLUDED.reconciled_at
WHERE p.watermark IS NULL OR (EXCLUDED.watermark IS NOT NULL AND p.watermark <= EXCLUDED.watermark)
RETURNING requirement_id, target_id
""")


def upsert_rows(scope: ReconcileScope, rows: list[tuple[TargetRow, Derived]]) -> set[tuple[UUID, UUID]]:
    """One statement; a row holding a newer watermark than ours is left alone (a concurrent,
    fresher reconcile wrote it). Returns the (requirement, target) pairs actually stored."""
    if not rows:
        return set()
    now = timezone.now()
    site, satellite, rc = scope.row_scope
    columns: list[list[Any]] = [
        [site] * len(rows),
        [satellite] * len(rows),
        [rc] * len(rows),
        [t.requirement_id for t, _ in rows],
        [t.gate for t, _ in rows],
        [t.device_id for t, _ in rows],
        [t.topology_id for t, _ in rows],
        [t.target_id for t, _ in rows],
        [d.verdict for _, d in rows],
        [d.execution_id for _, d in rows],
        [d.source_key for _, d in rows],
        [scope.policy.version] * len(rows),
        [d.watermark for _, d in rows],
        [now] * len(rows),
        [now] * len(rows),
    ]
    with connection.cursor() as cursor:
        cursor.execute(_UPSERT, columns)
        return {(r[0], r[1]) for r in cursor.fetchall()}


_IN_SCOPE = (
    "p.site_id = %(site)s AND p.satellite_id = %(satellite)s AND p.resource_class = %(rc)s"
    " AND (%(gate)s::varchar IS NULL OR p.gate = %(gate)s)"
)

_DELETE_RETIRED = sql(
    """
DELETE FROM {progress} p USING {requirement} r
WHERE p.requirement_id = r.id AND {in_scope}
  AND (r.retired_at IS NOT NULL OR r.policy_id <> %(policy)s
       OR (%(gate)s::varchar IS NOT NULL AND r.gate <> %(gate)s)
       OR (p.device_id IS NOT NULL AND r.scope <> %(single_node)s)
       OR (p.topology_id IS NOT NULL AND (r.scope <> %(multi_node)s OR r.unit IS DISTINCT FROM
           (SELECT t.unit FROM {topology} t WHERE t.id = p.topology_id))))
""",
    in_scope=_IN_SCOPE,
)

_TARGET_STILL_IN_SCOPE = sql(
    """CASE
    WHEN p.device_id IS NOT NULL THEN r.scope = %(single_node)s AND EXISTS (
        SELECT 1 FROM {device} d WHERE d.id = p.device_id AND {scope_device})
    ELSE r.scope = %(multi_node)s AND EXISTS (
        SELECT 1 FROM {topology} t WHERE t.id = p.topology_id AND t.unit = r.unit AND {scope_topology})
END""",
    scope_device=SCOPE_DEVICE,
    scope_topology=SCOPE_TOPOLOGY,
)

_DELETE_VANISHED_GUARDED = sql(
    """
WITH scope_rows AS (
    SELECT p.id, NOT ({still_in_scope}) AS vanished
    FROM {progress} p JOIN {requirement} r ON r.id = p.requirement_id
    WHERE {in_scope}
), verdict AS (
    SELECT count(*) FILTER (WHERE vanished) AS vanished, count(*) AS total,
           count(*) FILTER (WHERE vanished) <= GREATEST(%(absolute)s, %(ratio)s * count(*)) AS allowed
    FROM scope_rows
), deleted AS (
    DELETE FROM {progress} WHERE id IN (SELECT id FROM scope_rows WHERE vanished)
      AND (SELECT allowed FROM verdict)
    RETURNING 1
)
SELECT vanished, total, allowed, (SELECT count(*) FROM deleted) FROM verdict
""",
    still_in_scope=_TARGET_STILL_IN_SCOPE,
    in_scope=_IN_SCOPE,
)


def cleanup(scope: ReconcileScope) -> tuple[int, bool]:
    """Delete rows the policy no longer asks for (retired or removed requirements, a requirement
    that left the gate or changed its scope or unit: always), then rows whose target left the
    scope, unless there are more of them than the guard allows. Returns (deleted, guard_tripped)."""
    fleet = settings.FLEET
    params = scope_params(scope) | {
        "absolute": fleet["RECONCILE_GUARD_ABSOLUTE"],
        "ratio": fleet["RECONCILE_GUARD_RATIO"],
    }
    with connection.cursor() as cursor:
        cursor.execute(_DELETE_RETIRED, params)
        retired = cursor.rowcount
        cursor.execute(_DELETE_VANISHED_GUARDED, params)
        vanished, total, allowed, removed = cursor.fetchone()
    if not allowed:
        logger.warning(
            "reconcile guard tripped for %s: %d of %d rows lost their target; none of them deleted "
            "(limit max(%d, %.0f%% of rows)). Check the inventory feed before a later sweep removes them.",
            scope.describe(),
            vanished,
            total,
            params["absolute"],
            params["ratio"] * 100,
        )
    return retired + removed, not allowed
