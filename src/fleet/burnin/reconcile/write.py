"""Reconcile's writes: the guarded upsert of a page, marking the rows whose target is gone, the
end-of-sweep cleanup, and the scope's sweep record."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import NamedTuple
from uuid import uuid4

from django.conf import settings
from django.db import connection
from django.utils import timezone

from fleet.burnin.fragments import target_history_sql
from fleet.burnin.reconcile.load import IN_SCOPE, SCOPE_DEVICE, SCOPE_TOPOLOGY, ReconcileScope, TargetRow, scope_params
from fleet.burnin.tables import sql
from fleet.core.rows import recordset
from fleet.core.statements import NoRow, Statement
from fleet.lifecycle.models import Repair
from fleet.policies.models import AcceptancePolicy
from fleet_rules.verdicts import Derived
from fleet_rules.vocabulary import RequirementScope, Verdict

logger = logging.getLogger("fleet.reconcile")


class Kept(NamedTuple):
    """A row of the page the upsert did not store (a fresher row stands: `stored` false) or stored
    as failed for a device (`failures`, its failures that count toward repair,
    `fragments.target_history_sql`, and `repaired_at`, the device's last repair: what `repair_due`
    judges, read by the write itself instead of a statement more), by its `position` among the rows
    sent. The upsert names no other row: every row it stored as anything else needs nothing more."""

    position: int
    stored: bool
    failures: int | None
    repaired_at: datetime | None


@dataclass(frozen=True)
class Written:
    """What a page's write stored: its rows (target and derivation, in the page's order), and of
    those, the device targets stored as failed with their counted failures and last repair."""

    rows: list[tuple[TargetRow, Derived]]
    failed: list[tuple[TargetRow, Derived, int, datetime | None]]


NOTHING_WRITTEN = Written([], [])


def _scope_example() -> dict[str, object]:
    """A scope's parameters for the statement test: no row matches them."""
    return {
        "site": uuid4(),
        "satellite": uuid4(),
        "rc": "example",
        "gate": None,
        "single_node": RequirementScope.SINGLE_NODE,
        "multi_node": RequirementScope.MULTI_NODE,
    }


#: The page's rows, each with what its target's history says (`fragments.target_history_sql`: one
#: pass over its counted attempts, with the device's last repair probed once), upserted; returned
#: are the rows it did not store and the device targets it stored as failed, with their counted
#: failures and last repair (what `repair_due` judges), each by its position among the rows sent
#: (`Kept`). The execution's finish time comes with the row (the page read it with the execution).
#: Before, the outcomes and the failures each read the history, the outcomes probed the repairs and
#: the policy once per attempt, and the finish time was a probe per row: 30,400 of a page's 43,400
#: buffers at 8 attempts per target. Per first sweep of the bench fleet, shared buffers 180,234 →
#: 157,348 at one attempt per target and 516,300 → 254,469 at eight; backend CPU 184 → 163 ms at one
#: (bench/explain.py, bench/README.md). It returned every pair it stored, which the page then
#: hashed by (requirement, target) twice: 500 rows of two uuids to parse, and a dict of them to
#: build and probe, on every page of a first sweep for the few it needs.
UPSERT = Statement(
    "burnin.reconcile.upsert",
    sql(
        """
WITH marked AS (
    UPDATE {progress} SET missing_in_sweep = %(started_at)s WHERE id = ANY(%(orphans)s::bigint[])
), source AS MATERIALIZED (
    SELECT u.i, u.r, u.g, u.d, u.t, u.v, u.x, u.f, u.k, u.w, h.outcomes, h.failures, rp.repaired_at
    FROM jsonb_to_recordset(%(rows)s::jsonb)
        AS u(i int, r uuid, g varchar, d uuid, t uuid, v varchar, x uuid, f timestamptz, k varchar, w timestamptz)
    JOIN {policy} pol ON pol.id = %(policy)s
    LEFT JOIN LATERAL (SELECT max(rp.created_at) AS repaired_at FROM {repair} rp WHERE rp.device_id = u.d) rp ON true
    CROSS JOIN LATERAL {history} h
), stored AS (
    INSERT INTO {progress} AS p
        (site_id, satellite_id, resource_class, requirement_id, gate, device_id, topology_id, target_id, verdict,
         execution_id, finished_at, evaluation_source_key, policy_version, outcomes, watermark, reconciled_at,
         created_at)
    SELECT %(site)s, %(satellite)s, %(rc)s, s.r, s.g, s.d, s.t, COALESCE(s.d, s.t), s.v, s.x, s.f, s.k, %(version)s,
           s.outcomes, s.w, %(reconciled_at)s, %(created_at)s
    FROM source s
    ON CONFLICT (requirement_id, target_id) DO UPDATE SET
        site_id = EXCLUDED.site_id,
        satellite_id = EXCLUDED.satellite_id,
        resource_class = EXCLUDED.resource_class,
        gate = EXCLUDED.gate,
        verdict = EXCLUDED.verdict,
        execution_id = EXCLUDED.execution_id,
        finished_at = EXCLUDED.finished_at,
        evaluation_source_key = EXCLUDED.evaluation_source_key,
        policy_version = EXCLUDED.policy_version,
        outcomes = EXCLUDED.outcomes,
        watermark = EXCLUDED.watermark,
        reconciled_at = EXCLUDED.reconciled_at,
        missing_in_sweep = NULL
    WHERE p.watermark IS NULL OR (EXCLUDED.watermark IS NOT NULL AND p.watermark <= EXCLUDED.watermark)
    RETURNING p.requirement_id, p.target_id
)
SELECT s.i AS position, i.requirement_id IS NOT NULL AS stored,
    CASE WHEN s.v = {failed} AND s.d IS NOT NULL THEN s.failures END AS failures,
    CASE WHEN s.v = {failed} AND s.d IS NOT NULL THEN s.repaired_at END AS repaired_at
FROM source s LEFT JOIN stored i ON i.requirement_id = s.r AND i.target_id = COALESCE(s.d, s.t)
WHERE i.requirement_id IS NULL OR (s.v = {failed} AND s.d IS NOT NULL)
""",
        failed=f"'{Verdict.FAILED.value}'",
        policy=AcceptancePolicy._meta.db_table,
        repair=Repair._meta.db_table,
        history=target_history_sql("u.r", "u.d", "u.t", "pol.version_changed_at", "rp.repaired_at"),
    ),
    Kept,
    example=lambda: (
        _scope_example()
        | {
            "started_at": timezone.now(),
            "policy": uuid4(),
            "orphans": [],
            "version": 1,
            "reconciled_at": timezone.now(),
            "created_at": timezone.now(),
            "rows": "[]",
        }
    ),
)


def _rows(rows: list[tuple[TargetRow, Derived]]) -> Iterator[dict[str, object]]:
    """The rows as `UPSERT` reads them, each with its position (what `Kept` names it by). The uuids
    go as their 32 hex digits (PostgreSQL reads a uuid without its hyphens), a third of the
    Python's `str` (0.6 µs each here), and each requirement's id once a page: this is most of the
    client's time on a first sweep's write (2.9 → 2.3 ms a page of 476 rows)."""
    requirement_ids: dict[str, str] = {}
    for position, (target, derived) in enumerate(rows):
        name = target.requirement_name
        requirement_id = requirement_ids.get(name)
        if requirement_id is None:
            requirement_id = requirement_ids[name] = target.requirement_id.hex
        device, topology = target.device_id, target.topology_id
        execution, watermark = derived.execution_id, derived.watermark
        # The verdict's execution is always the target's latest, read with the page.
        finished = None if execution is None else target.finished_at
        yield {
            "i": position,
            "r": requirement_id,
            "g": target.gate,
            "d": None if device is None else device.hex,
            "t": None if topology is None else topology.hex,
            "v": derived.verdict,
            "x": None if execution is None else execution.hex,
            "f": None if finished is None else finished.isoformat(),
            "k": derived.source_key,
            "w": None if watermark is None else watermark.isoformat(),
        }


def page_write(
    scope: ReconcileScope, rows: list[tuple[TargetRow, Derived]], *, orphans: list[int], started_at: datetime
) -> Written:
    """One statement: upsert `rows`, where a row holding a newer watermark than ours is left
    alone (a concurrent, fresher reconcile wrote it); and stamp `orphans`, the rows whose target
    left the scope, with this sweep's start, so its final page decides (under the guard) whether
    they go. Returns the rows actually stored, and the device targets stored as failed with their
    failure counts. A page with neither (every page of a steady sweep) sends nothing: 1 ms of its 22."""
    if not rows and not orphans:
        return NOTHING_WRITTEN
    now = timezone.now()
    site, satellite, rc = scope.row_scope
    params = {
        "started_at": started_at,
        "orphans": orphans,
        "site": site,
        "satellite": satellite,
        "rc": rc,
        "version": scope.policy.version,
        "policy": scope.policy.id,
        "reconciled_at": now,
        "created_at": now,
        "rows": recordset(_rows(rows)),
    }
    with connection.cursor() as cursor:
        kept = UPSERT.rows(cursor, params)
    not_stored = {k.position for k in kept if not k.stored}
    return Written(
        [row for position, row in enumerate(rows) if position not in not_stored] if not_stored else rows,
        [(*rows[k.position], k.failures, k.repaired_at) for k in kept if k.stored and k.failures is not None],
    )


#: The distinct requirements of the scope's rows: a loose index scan (one probe per requirement
#: through the scope-key index), so finding retired requirements' rows never scans the scope.
DELETE_RETIRED = Statement(
    "burnin.reconcile.delete_retired",
    sql(
        """
WITH RECURSIVE requirements(id) AS (
    (SELECT p.requirement_id FROM {progress} p
     WHERE p.site_id = %(site)s AND p.satellite_id = %(satellite)s AND p.resource_class = %(rc)s
     ORDER BY p.requirement_id LIMIT 1)
    UNION ALL
    SELECT (SELECT p.requirement_id FROM {progress} p
            WHERE p.site_id = %(site)s AND p.satellite_id = %(satellite)s AND p.resource_class = %(rc)s
              AND p.requirement_id > requirements.id
            ORDER BY p.requirement_id LIMIT 1)
    FROM requirements WHERE requirements.id IS NOT NULL
)
DELETE FROM {progress} p
WHERE {in_scope} AND p.requirement_id IN (
    SELECT id FROM requirements WHERE id IS NOT NULL AND id <> ALL(%(current)s::uuid[]))
""",
        in_scope=IN_SCOPE,
    ),
    NoRow,
    example=lambda: _scope_example() | {"current": [uuid4()]},
)

_TARGET_STILL_IN_SCOPE = sql(
    """CASE
    WHEN p.device_id IS NOT NULL THEN EXISTS (SELECT 1 FROM {device} d WHERE d.id = p.device_id AND {scope_device})
    ELSE EXISTS (SELECT 1 FROM {topology} t WHERE t.id = p.topology_id AND t.unit = r.unit AND {scope_topology})
END""",
    scope_device=SCOPE_DEVICE,
    scope_topology=SCOPE_TOPOLOGY,
)

#: Rows of a current requirement that are not of its kind (a device row of a multi-node
#: requirement, a topology of another unit): the policy no longer asks for them, guard or not.
_WRONG_KIND = sql("""(p.device_id IS NOT NULL AND r.scope <> %(single_node)s)
    OR (p.topology_id IS NOT NULL AND (r.scope <> %(multi_node)s OR r.unit IS DISTINCT FROM
        (SELECT t.unit FROM {topology} t WHERE t.id = p.topology_id)))""")


class GuardedCleanup(NamedTuple):
    """What the guarded delete found: rows that lost their target, whether the guard lets them go,
    and the rows it deleted (those, and rows not of their requirement's kind)."""

    vanished: int
    allowed: bool
    removed: int


#: The rows this sweep marked missing (through the partial index: what it marked, never the
#: scope), re-checked now: a target back in scope since its page keeps its row.
DELETE_MISSING_GUARDED = Statement(
    "burnin.reconcile.delete_missing_guarded",
    sql(
        """
WITH marked AS (
    SELECT p.id, ({wrong_kind}) AS wrong_kind, NOT ({still_in_scope}) AS vanished
    FROM {progress} p JOIN {requirement} r ON r.id = p.requirement_id
    WHERE p.site_id = %(site)s AND p.satellite_id = %(satellite)s AND p.resource_class = %(rc)s
      AND p.missing_in_sweep = %(started_at)s AND (%(gate)s::varchar IS NULL OR p.gate = %(gate)s)
), verdict AS (
    SELECT count(*) FILTER (WHERE vanished AND NOT wrong_kind) AS vanished,
           count(*) FILTER (WHERE vanished AND NOT wrong_kind) <= GREATEST(%(absolute)s, %(ratio)s * %(rows)s)
               AS allowed
    FROM marked
), deleted AS (
    DELETE FROM {progress} WHERE id IN (
        SELECT id FROM marked WHERE wrong_kind OR (vanished AND (SELECT allowed FROM verdict)))
    RETURNING 1
)
SELECT vanished, allowed, (SELECT count(*) FROM deleted) AS removed FROM verdict
""",
        wrong_kind=_WRONG_KIND,
        still_in_scope=_TARGET_STILL_IN_SCOPE,
    ),
    GuardedCleanup,
    example=lambda: _scope_example() | {"started_at": timezone.now(), "absolute": 10, "ratio": 0.05, "rows": 0},
)


def cleanup(scope: ReconcileScope, *, started_at: datetime, rows_in_scope: int) -> tuple[int, bool]:
    """Delete rows the policy no longer asks for (retired or removed requirements, a requirement
    that left the gate, rows not of their requirement's kind: always), then the rows this sweep
    found without a target, unless there are more of them than the guard allows (of
    `rows_in_scope`, the rows the sweep's pages counted). Returns (deleted, guard_tripped)."""
    fleet = settings.FLEET
    params = scope_params(scope) | {
        "absolute": fleet["RECONCILE_GUARD_ABSOLUTE"],
        "ratio": fleet["RECONCILE_GUARD_RATIO"],
        "current": [r.id for r in scope.requirements],
        "started_at": started_at,
        "rows": rows_in_scope,
    }
    with connection.cursor() as cursor:
        retired = DELETE_RETIRED.run(cursor, params)
        guarded = DELETE_MISSING_GUARDED.one(cursor, params)
    assert guarded is not None  # an aggregate over `marked`: always one row
    if not guarded.allowed:
        logger.warning(
            "reconcile guard tripped for %s: %d of %d rows lost their target; none of them deleted "
            "(limit max(%d, %.0f%% of rows)). Check the inventory feed before a later sweep removes them.",
            scope.describe(),
            guarded.vanished,
            rows_in_scope,
            params["absolute"],
            params["ratio"] * 100,
        )
    return retired + guarded.removed, not guarded.allowed


@dataclass(frozen=True)
class SweepRecord:
    """What a finished sweep counted, for its scope's `ReconcileSweep` row."""

    started_at: datetime
    target_count: int
    written: int
    unchanged: int
    deferred: int
    deleted: int
    guard_tripped: bool


RECORD_SWEEP = Statement(
    "burnin.reconcile.record_sweep",
    sql("""
INSERT INTO {sweep} AS s
    (site_id, satellite_id, resource_class, gate, policy_version, started_at, completed_at, target_count,
     written, unchanged, deferred, deleted, guard_tripped)
VALUES (%(site)s, %(satellite)s, %(rc)s, %(gate)s, %(version)s, %(started_at)s, %(completed_at)s,
        %(target_count)s, %(written)s, %(unchanged)s, %(deferred)s, %(deleted)s, %(guard_tripped)s)
ON CONFLICT (site_id, satellite_id, resource_class, gate) DO UPDATE SET
    policy_version = EXCLUDED.policy_version, started_at = EXCLUDED.started_at,
    completed_at = EXCLUDED.completed_at, target_count = EXCLUDED.target_count, written = EXCLUDED.written,
    unchanged = EXCLUDED.unchanged, deferred = EXCLUDED.deferred, deleted = EXCLUDED.deleted,
    guard_tripped = EXCLUDED.guard_tripped
WHERE s.started_at <= EXCLUDED.started_at
"""),
    NoRow,
    # The example inserts a row for a scope that does not exist: Django's foreign keys are checked
    # at commit, and the statement test rolls back first.
    example=lambda: {
        "site": uuid4(),
        "satellite": uuid4(),
        "rc": "example",
        "gate": None,
        "version": 1,
        "started_at": timezone.now(),
        "completed_at": timezone.now(),
        "target_count": 0,
        "written": 0,
        "unchanged": 0,
        "deferred": 0,
        "deleted": 0,
        "guard_tripped": False,
    },
)


def sweep_record(scope: ReconcileScope, record: SweepRecord) -> None:
    """Record the scope's completed sweep; a slower sweep that started earlier never replaces the
    record of one that started later."""
    site, satellite, rc = scope.row_scope
    with connection.cursor() as cursor:
        RECORD_SWEEP.run(
            cursor,
            {
                "site": site,
                "satellite": satellite,
                "rc": rc,
                "gate": scope.gate,
                "version": scope.policy.version,
                "completed_at": timezone.now(),
                **record.__dict__,
            },
        )
