"""What a reconcile page needs: the scope, the sweep's size, and one page of targets with their
latest execution, its evaluation and their stored projection row — each in one query."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from uuid import UUID

from django.core.exceptions import ValidationError
from django.db import connection

from fleet.burnin.selectors import latest_execution_sql
from fleet.burnin.tables import sql
from fleet.inventory.identity import Actor
from fleet.inventory.models import Satellite
from fleet.inventory.selectors import satellite_acting
from fleet.policies.models import AcceptancePolicy, Requirement
from fleet.policies.selectors import load_resolutions
from fleet_rules.eligibility import enrolled_sql
from fleet_rules.verdicts import Evidence, StoredRow
from fleet_rules.vocabulary import RequirementScope


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


def reconcile_scope_load(
    *, site_slug: str, satellite_name: str, resource_class: str, gate: str | None, actor: Actor
) -> ReconcileScope:
    """Resolve and check the scope: field errors for what does not exist, 403 for a satellite
    client reconciling another satellite's scope."""
    satellite = satellite_acting(site_slug=site_slug, satellite_name=satellite_name, actor=actor)
    policy = AcceptancePolicy.objects.filter(resource_class=resource_class).first()
    if policy is None:
        raise ValidationError({"resource_class": [f"No acceptance policy for resource class {resource_class!r}."]})
    requirements = Requirement.objects.filter(policy=policy, retired_at__isnull=True)
    if gate:
        requirements = requirements.filter(gate=gate)
    # Code-point order, as the page query sorts with COLLATE "C": the cursor must mean the same
    # position whatever collation the database was created with.
    ordered = tuple(sorted(requirements, key=lambda r: r.name))
    resolutions = load_resolutions((r.id, satellite.site_id) for r in ordered)
    return ReconcileScope(
        satellite=satellite,
        policy=policy,
        resource_class=resource_class,
        gate=gate or None,
        requirements=ordered,
        current_keys={r.id: resolutions[(r.id, satellite.site_id)].key for r in ordered},
    )


# --- target enumeration ------------------------------------------------------------------------

#: The scope's single-node targets: enrolled devices of the class managed by the satellite.
SCOPE_DEVICE = (
    f"d.site_id = %(site)s AND d.satellite_id = %(satellite)s AND d.resource_class = %(rc)s AND {enrolled_sql('d')}"
)
#: The scope's multi-node targets: its satellite's topologies holding an enrolled device of the class.
SCOPE_TOPOLOGY = sql(
    """t.site_id = %(site)s AND t.satellite_id = %(satellite)s AND EXISTS (
    SELECT 1 FROM {membership} m JOIN {device} d ON d.id = m.device_id
    WHERE m.topology_id = t.id AND d.resource_class = %(rc)s AND {enrolled})""",
    enrolled=enrolled_sql("d"),
)


def scope_params(scope: ReconcileScope) -> dict[str, Any]:
    return {
        "site": scope.site_id,
        "satellite": scope.satellite.id,
        "rc": scope.resource_class,
        "policy": scope.policy.id,
        "gate": scope.gate,
        "single_node": RequirementScope.SINGLE_NODE,
        "multi_node": RequirementScope.MULTI_NODE,
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
                sql(
                    "({head}, d.id AS target_id, d.id AS device_id, NULL::uuid AS topology_id "
                    "FROM {device} d WHERE {where}{resume} ORDER BY d.id LIMIT %(limit)s)",
                    head=head,
                    where=SCOPE_DEVICE,
                    resume=resume.format(alias="d"),
                )
            )
        else:
            params[f"unit{index}"] = requirement.unit
            branches.append(
                sql(
                    "({head}, t.id AS target_id, NULL::uuid AS device_id, t.id AS topology_id "
                    "FROM {topology} t WHERE t.unit = %(unit{index})s AND {where}{resume} "
                    "ORDER BY t.id LIMIT %(limit)s)",
                    head=head,
                    index=str(index),
                    where=SCOPE_TOPOLOGY,
                    resume=resume.format(alias="t"),
                )
            )
    return branches


_PAGE = sql(
    """
WITH page AS (
    SELECT * FROM ({{branches}}) AS targets ORDER BY requirement_name COLLATE "C", target_id LIMIT %(limit)s
)
SELECT page.requirement_id, page.requirement_name, page.target_id, page.device_id, page.topology_id,
       x.id, x.status, x.updated_at,
       ev.passed, ev.evaluation_source_key, ev.execution_updated_at, ev.materialised_at,
       p.id, p.verdict, p.execution_id, p.evaluation_source_key, p.policy_version, p.watermark,
       p.site_id, p.satellite_id, p.resource_class, p.gate
FROM page
LEFT JOIN LATERAL {latest} x ON true
LEFT JOIN {evaluation} ev ON ev.execution_id = x.id
LEFT JOIN {progress} p ON p.requirement_id = page.requirement_id AND p.target_id = page.target_id
ORDER BY page.requirement_name COLLATE "C", page.target_id
""",
    latest=latest_execution_sql("page", "e.id, e.status, e.updated_at"),
)

_COUNT = sql(
    """
SELECT 'device', NULL, count(*) FROM {device} d WHERE {scope_device}
UNION ALL
SELECT 'topology', t.unit, count(*) FROM {topology} t WHERE {scope_topology} GROUP BY t.unit
""",
    scope_device=SCOPE_DEVICE,
    scope_topology=SCOPE_TOPOLOGY,
)


def count_targets(scope: ReconcileScope) -> int:
    """The sweep's total: devices once per single-node requirement, topologies of each
    multi-node requirement's unit."""
    if not scope.requirements:
        return 0
    devices, topologies = 0, {}
    with connection.cursor() as cursor:
        cursor.execute(_COUNT, scope_params(scope))
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


def load_page(scope: ReconcileScope, after: tuple[str, UUID] | None, limit: int) -> list[TargetRow]:
    """Up to `limit + 1` targets after `after` (the extra one says whether a page follows)."""
    params = scope_params(scope) | {"limit": limit + 1, "after_id": after[1] if after else None}
    branches = _target_branches(scope, after, params)
    if not branches:
        return []
    gates = {r.id: r.gate for r in scope.requirements}
    with connection.cursor() as cursor:
        cursor.execute(_PAGE.replace("{branches}", " UNION ALL ".join(branches)), params)
        rows = cursor.fetchall()
    targets = []
    for row in rows:
        (req_id, req_name, target_id, device_id, topology_id, ex_id, ex_status, ex_updated) = row[:8]
        (ev_passed, ev_key, ev_for, ev_at) = row[8:12]
        (p_id, p_verdict, p_execution, p_key, p_version, p_watermark, p_site, p_satellite, p_rc, p_gate) = row[12:]
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
