"""Phase 2: keep the policy-progress projection equal to what the evidence says, one keyset page
at a time, and clean up at the end of a sweep without ever mass-deleting rows because an
inventory feed hiccuped.

A page is a constant number of queries whatever its size: scope (3), the sweep's target count
(first page only), one query for the page's targets with their latest execution, its evaluation
and the stored row, one guarded bulk upsert, and two cleanup statements on the final page.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from uuid import UUID

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import connection, transaction
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from fleet.burnin.verdicts import Derived, Evidence, RowAction, StoredRow, decide_row, derive_verdict
from fleet.core.cursors import cursor_decode, cursor_encode
from fleet.core.principals import ensure_acts_as_satellite
from fleet.inventory.models import DeviceState, Satellite
from fleet.inventory.selectors import satellite_of_site
from fleet.policies.models import AcceptancePolicy, Requirement, RequirementScope
from fleet.policies.resolution import load_resolutions

logger = logging.getLogger("fleet.reconcile")

RESTART = "Restart the sweep without a cursor."


@dataclass(frozen=True)
class ReconcileScope:
    satellite: Satellite
    policy: AcceptancePolicy
    resource_class: str
    gate: str | None
    requirements: tuple[Requirement, ...]  # non-retired, of the gate, sorted by name
    current_keys: dict[UUID, str]

    @property
    def site_id(self) -> UUID:
        return self.satellite.site_id

    @property
    def row_scope(self) -> tuple[UUID, UUID, str]:
        return (self.satellite.site_id, self.satellite.id, self.resource_class)

    def describe(self) -> str:
        gate = f", gate {self.gate}" if self.gate else ""
        return f"{self.satellite} / {self.resource_class}{gate}"


@dataclass
class ReconcilePage:
    written: int = 0
    unchanged: int = 0
    deferred: int = 0
    deleted: int = 0
    guard_tripped: bool = False
    next_cursor: str | None = None
    target_count: int = 0


def reconcile_scope_load(
    *, site_slug: str, satellite_name: str, resource_class: str, gate: str | None, actor: Any
) -> ReconcileScope:
    """Resolve and check the scope: field errors for what does not exist, 403 for a satellite
    client reconciling another satellite's scope."""
    satellite = satellite_of_site(site_slug=site_slug, satellite_name=satellite_name)
    ensure_acts_as_satellite(actor, satellite)
    policy = AcceptancePolicy.objects.filter(resource_class=resource_class).first()
    if policy is None:
        raise ValidationError({"resource_class": [f"No acceptance policy for resource class {resource_class!r}."]})
    requirements = Requirement.objects.filter(policy=policy, retired_at__isnull=True)
    if gate:
        requirements = requirements.filter(gate=gate)
    # Code-point order, as the page query sorts with COLLATE "C": the cursor must mean the same
    # position whatever collation the database was created with.
    requirements = tuple(sorted(requirements, key=lambda r: r.name))
    resolutions = load_resolutions((r.id, satellite.site_id) for r in requirements)
    return ReconcileScope(
        satellite=satellite,
        policy=policy,
        resource_class=resource_class,
        gate=gate or None,
        requirements=requirements,
        current_keys={r.id: resolutions[(r.id, satellite.site_id)].key for r in requirements},
    )


# --- target enumeration ------------------------------------------------------------------------

_ENROLLED = "d.enrolled_at IS NOT NULL AND d.state <> %(decommissioned)s"
_SCOPE_DEVICE = f"d.site_id = %(site)s AND d.satellite_id = %(satellite)s AND d.resource_class = %(rc)s AND {_ENROLLED}"
_TOPOLOGY_HOLDS_SCOPE_DEVICE = f"""EXISTS (
    SELECT 1 FROM inventory_topologymembership m JOIN inventory_device d ON d.id = m.device_id
    WHERE m.topology_id = t.id AND d.resource_class = %(rc)s AND {_ENROLLED})"""
_SCOPE_TOPOLOGY = f"t.site_id = %(site)s AND t.satellite_id = %(satellite)s AND {_TOPOLOGY_HOLDS_SCOPE_DEVICE}"


def _base_params(scope: ReconcileScope) -> dict[str, Any]:
    return {
        "site": scope.site_id,
        "satellite": scope.satellite.id,
        "rc": scope.resource_class,
        "decommissioned": DeviceState.DECOMMISSIONED,
        "policy": scope.policy.id,
        "gate": scope.gate,
    }


def _target_branches(scope: ReconcileScope, after: tuple[str, UUID] | None, params: dict[str, Any]) -> list[str]:
    """One ordered, limited branch per requirement still ahead of the cursor, so each page reads
    at most limit+1 targets per requirement through the scope indexes."""
    branches = []
    for index, requirement in enumerate(scope.requirements):
        if after is not None and requirement.name < after[0]:
            continue
        params[f"req{index}"] = requirement.id
        params[f"name{index}"] = requirement.name
        resume = " AND {alias}.id > %(after_id)s" if after is not None and requirement.name == after[0] else ""
        head = f"SELECT %(req{index})s::uuid AS requirement_id, %(name{index})s::varchar AS requirement_name"
        if requirement.scope == RequirementScope.SINGLE_NODE:
            branches.append(
                f"({head}, d.id AS target_id, d.id AS device_id, NULL::uuid AS topology_id "
                f"FROM inventory_device d WHERE {_SCOPE_DEVICE}{resume.format(alias='d')} "
                f"ORDER BY d.id LIMIT %(limit)s)"
            )
        else:
            params[f"unit{index}"] = requirement.unit
            branches.append(
                f"({head}, t.id AS target_id, NULL::uuid AS device_id, t.id AS topology_id "
                f"FROM inventory_topology t WHERE t.unit = %(unit{index})s AND {_SCOPE_TOPOLOGY}"
                f"{resume.format(alias='t')} ORDER BY t.id LIMIT %(limit)s)"
            )
    return branches


_PAGE = """
WITH page AS (
    SELECT * FROM ({branches}) AS targets ORDER BY requirement_name COLLATE "C", target_id LIMIT %(limit)s
)
SELECT page.requirement_id, page.requirement_name, page.target_id, page.device_id, page.topology_id,
       x.id, x.status, x.updated_at,
       ev.passed, ev.evaluation_source_key, ev.execution_updated_at, ev.materialised_at,
       p.id, p.verdict, p.execution_id, p.evaluation_source_key, p.policy_version, p.watermark,
       p.site_id, p.satellite_id, p.resource_class, p.gate
FROM page
LEFT JOIN LATERAL (
    (SELECT e.id, e.status, e.updated_at FROM burnin_testexecution e
     WHERE page.device_id IS NOT NULL AND e.requirement_id = page.requirement_id AND e.device_id = page.device_id
     ORDER BY e.created_at DESC, e.id DESC LIMIT 1)
    UNION ALL
    (SELECT e.id, e.status, e.updated_at FROM burnin_testexecution e
     WHERE page.topology_id IS NOT NULL AND e.requirement_id = page.requirement_id
       AND e.topology_id = page.topology_id
     ORDER BY e.created_at DESC, e.id DESC LIMIT 1)
) x ON true
LEFT JOIN burnin_evaluationresult ev ON ev.execution_id = x.id
LEFT JOIN burnin_policyprogress p ON p.requirement_id = page.requirement_id AND p.target_id = page.target_id
ORDER BY page.requirement_name COLLATE "C", page.target_id
"""

_COUNT = f"""
SELECT 'device', NULL, count(*) FROM inventory_device d WHERE {_SCOPE_DEVICE}
UNION ALL
SELECT 'topology', t.unit, count(*) FROM inventory_topology t WHERE {_SCOPE_TOPOLOGY} GROUP BY t.unit
"""


def count_targets(scope: ReconcileScope) -> int:
    """The sweep's total: devices once per single-node requirement, topologies of each
    multi-node requirement's unit."""
    if not scope.requirements:
        return 0
    devices, topologies = 0, {}
    with connection.cursor() as cursor:
        cursor.execute(_COUNT, _base_params(scope))
        for kind, unit, n in cursor.fetchall():
            if kind == "device":
                devices = n
            else:
                topologies[unit] = n
    return sum(
        devices if r.scope == RequirementScope.SINGLE_NODE else topologies.get(r.unit, 0) for r in scope.requirements
    )


@dataclass(frozen=True)
class TargetRow:
    requirement_id: UUID
    requirement_name: str
    gate: str
    target_id: UUID
    device_id: UUID | None
    topology_id: UUID | None
    evidence: Evidence | None
    stored: StoredRow | None


def _load_page(scope: ReconcileScope, after: tuple[str, UUID] | None, limit: int) -> list[TargetRow]:
    params = _base_params(scope) | {"limit": limit + 1, "after_id": after[1] if after else None}
    branches = _target_branches(scope, after, params)
    if not branches:
        return []
    gates = {r.id: r.gate for r in scope.requirements}
    with connection.cursor() as cursor:
        cursor.execute(_PAGE.format(branches=" UNION ALL ".join(branches)), params)
        rows = cursor.fetchall()
    targets = []
    for row in rows:
        (
            req_id,
            req_name,
            target_id,
            device_id,
            topology_id,
            ex_id,
            ex_status,
            ex_updated,
            ev_passed,
            ev_key,
            ev_for,
            ev_at,
            p_id,
            p_verdict,
            p_execution,
            p_key,
            p_version,
            p_watermark,
            p_site,
            p_satellite,
            p_rc,
            p_gate,
        ) = row
        evidence = (
            Evidence(ex_id, ex_status, ex_updated, ev_passed, ev_key, ev_for, ev_at) if ex_id is not None else None
        )
        stored = (
            StoredRow(p_verdict, p_execution, p_key, p_version, p_watermark, (p_site, p_satellite, p_rc, p_gate))
            if p_id is not None
            else None
        )
        targets.append(TargetRow(req_id, req_name, gates[req_id], target_id, device_id, topology_id, evidence, stored))
    return targets


# --- writing ----------------------------------------------------------------------------------

_UPSERT = """
INSERT INTO burnin_policyprogress AS p
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
"""


def _upsert(scope: ReconcileScope, rows: list[tuple[TargetRow, Derived]]) -> set[tuple[UUID, UUID]]:
    """One statement; a row holding a newer watermark than ours is left alone (a concurrent,
    fresher reconcile wrote it). Returns the (requirement, target) pairs actually stored."""
    if not rows:
        return set()
    now = timezone.now()
    site, satellite, rc = scope.row_scope
    columns = [
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


# --- end-of-sweep cleanup ----------------------------------------------------------------------

_IN_SCOPE = (
    "p.site_id = %(site)s AND p.satellite_id = %(satellite)s AND p.resource_class = %(rc)s"
    " AND (%(gate)s::varchar IS NULL OR p.gate = %(gate)s)"
)

_DELETE_RETIRED = f"""
DELETE FROM burnin_policyprogress p USING policies_requirement r
WHERE p.requirement_id = r.id AND {_IN_SCOPE}
  AND (r.retired_at IS NOT NULL OR r.policy_id <> %(policy)s
       OR (%(gate)s::varchar IS NOT NULL AND r.gate <> %(gate)s)
       OR (p.device_id IS NOT NULL AND r.scope <> 'single_node')
       OR (p.topology_id IS NOT NULL AND (r.scope <> 'multi_node' OR r.unit IS DISTINCT FROM
           (SELECT t.unit FROM inventory_topology t WHERE t.id = p.topology_id))))
"""

_TARGET_STILL_IN_SCOPE = f"""CASE
    WHEN p.device_id IS NOT NULL THEN r.scope = 'single_node' AND EXISTS (
        SELECT 1 FROM inventory_device d WHERE d.id = p.device_id AND {_SCOPE_DEVICE})
    ELSE r.scope = 'multi_node' AND EXISTS (
        SELECT 1 FROM inventory_topology t WHERE t.id = p.topology_id AND t.unit = r.unit AND {_SCOPE_TOPOLOGY})
END"""

_DELETE_VANISHED_GUARDED = f"""
WITH scope_rows AS (
    SELECT p.id, NOT ({_TARGET_STILL_IN_SCOPE}) AS vanished
    FROM burnin_policyprogress p JOIN policies_requirement r ON r.id = p.requirement_id
    WHERE {_IN_SCOPE}
), verdict AS (
    SELECT count(*) FILTER (WHERE vanished) AS vanished, count(*) AS total,
           count(*) FILTER (WHERE vanished) <= GREATEST(%(absolute)s, %(ratio)s * count(*)) AS allowed
    FROM scope_rows
), deleted AS (
    DELETE FROM burnin_policyprogress WHERE id IN (SELECT id FROM scope_rows WHERE vanished)
      AND (SELECT allowed FROM verdict)
    RETURNING 1
)
SELECT vanished, total, allowed, (SELECT count(*) FROM deleted) FROM verdict
"""


def _cleanup(scope: ReconcileScope) -> tuple[int, bool]:
    """Delete rows the policy no longer asks for (retired or removed requirements, a requirement
    that left the gate or changed its scope or unit: always), then rows whose target left the
    scope, unless there are more of them than the guard allows. Returns (deleted, guard_tripped)."""
    fleet = settings.FLEET
    params = _base_params(scope) | {
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


# --- the page ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class SweepState:
    target_count: int
    started_at: datetime
    after: tuple[str, UUID] | None


def _cursor_payload(scope: ReconcileScope, state: SweepState, last: TargetRow) -> dict[str, Any]:
    return {
        "site": str(scope.site_id),
        "satellite": str(scope.satellite.id),
        "rc": scope.resource_class,
        "gate": scope.gate,
        "version": scope.policy.version,
        "started_at": state.started_at.isoformat(),
        "target_count": state.target_count,
        "after": [last.requirement_name, str(last.target_id)],
    }


def sweep_state(scope: ReconcileScope, cursor: str | None) -> SweepState:
    """A new sweep (count its targets) or the one a cursor continues (refusing a cursor that is
    forged, belongs to another scope, or predates a policy change)."""
    if not cursor:
        return SweepState(count_targets(scope), timezone.now(), None)
    payload = cursor_decode(cursor, purpose="reconcile", restart_hint=RESTART)
    same_scope = (payload.get("site"), payload.get("satellite"), payload.get("rc"), payload.get("gate")) == (
        str(scope.site_id),
        str(scope.satellite.id),
        scope.resource_class,
        scope.gate,
    )
    if not same_scope:
        raise ValidationError({"cursor": [f"This cursor belongs to another sweep scope. {RESTART}"]})
    if payload.get("version") != scope.policy.version:
        raise ValidationError(
            {
                "cursor": [
                    f"The acceptance policy for {scope.resource_class} changed (version {payload.get('version')} → "
                    f"{scope.policy.version}) since this sweep started. {RESTART}"
                ]
            }
        )
    name, target = payload["after"]
    return SweepState(int(payload["target_count"]), parse_datetime(payload["started_at"]), (name, UUID(target)))


@transaction.atomic
def progress_reconcile_page(*, scope: ReconcileScope, limit: int, cursor: str | None) -> ReconcilePage:
    state = sweep_state(scope, cursor)
    targets = _load_page(scope, state.after, limit)
    has_more = len(targets) > limit
    targets = targets[:limit]
    page = ReconcilePage(target_count=state.target_count)

    row_scope = (*scope.row_scope,)
    to_store: list[tuple[TargetRow, Derived]] = []
    intended_writes: set[tuple[UUID, UUID]] = set()
    for target in targets:
        derived = derive_verdict(target.evidence, scope.current_keys[target.requirement_id])
        if derived is None:
            page.deferred += 1
            continue
        action = decide_row(
            derived, target.stored, policy_version=scope.policy.version, scope=(*row_scope, target.gate)
        )
        if action is RowAction.KEEP_NEWER:
            page.unchanged += 1
            continue
        to_store.append((target, derived))
        if action is RowAction.WRITE:
            intended_writes.add((target.requirement_id, target.target_id))
        else:
            page.unchanged += 1
    stored = _upsert(scope, to_store)
    page.written = len(intended_writes & stored)
    page.unchanged += len(intended_writes - stored)

    if has_more:
        page.next_cursor = cursor_encode(_cursor_payload(scope, state, targets[-1]), purpose="reconcile")
    else:
        page.deleted, page.guard_tripped = _cleanup(scope)
        if state.target_count == 0:
            logger.warning("reconcile of %s: the policy governs no target (target_count 0)", scope.describe())
    return page
