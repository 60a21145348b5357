"""Burn-in reads shared by several operations and pages."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from uuid import UUID

from django.db.models import Count

from fleet.burnin.models import PolicyProgress, TestExecution
from fleet.burnin.tables import sql
from fleet.core.exceptions import NotFoundError
from fleet.inventory.identity import Actor, ensure_site_allowed
from fleet.inventory.models import Device, Satellite, Site
from fleet.lifecycle.models import Repair
from fleet.policies.models import AcceptancePolicy
from fleet_rules.vocabulary import Verdict


def latest_execution_sql(target: str, columns: str) -> str:
    """A LATERAL subquery: the latest execution of the target row `target` (which has
    `requirement_id`, `device_id` and `topology_id`, one of the last two null), found through the
    "latest execution of a target" indexes, so its cost grows with the targets asked about, not
    with history. `columns` are of the execution `e`."""
    return sql(
        """(
    (SELECT {columns} FROM {execution} e
     WHERE {target}.device_id IS NOT NULL AND e.requirement_id = {target}.requirement_id
       AND e.device_id = {target}.device_id AND NOT e.diagnostic
     ORDER BY e.created_at DESC, e.id DESC LIMIT 1)
    UNION ALL
    (SELECT {columns} FROM {execution} e
     WHERE {target}.topology_id IS NOT NULL AND e.requirement_id = {target}.requirement_id
       AND e.topology_id = {target}.topology_id AND NOT e.diagnostic
     ORDER BY e.created_at DESC, e.id DESC LIMIT 1)
)""",
        target=target,
        columns=columns,
    )


def prior_runs_sql(target: str, latest: str) -> str:
    """A LATERAL subquery for `consecutive_passes`: the finished executions of the target row
    `target` (which has `requirement_id`, `device_id`, `topology_id`, `k` and `current_key`)
    created before its latest execution `latest` and since the policy's version changed (the
    `since` parameter) — on a device, also since its last repair (a repaired device proves its k
    passes again: `fleet_rules.lifecycle`) — newest first, at most k − 1 of them, as parallel
    arrays of status, evaluation verdict, whether that evaluation is current, and when it was
    materialised. Runs only for requirements with k > 1, through the same indexes as the latest
    execution."""
    branch = """(SELECT e.created_at, e.id, e.status, ev.passed,
            coalesce(ev.evaluation_source_key = {target}.current_key AND ev.execution_updated_at = e.updated_at,
                     false) AS current,
            ev.materialised_at
     FROM {execution} e
     LEFT JOIN {evaluation} ev ON ev.execution_id = e.id
     WHERE {target}.k > 1 AND {target}.{column} IS NOT NULL AND e.requirement_id = {target}.requirement_id
       AND e.{column} = {target}.{column} AND (e.created_at, e.id) < ({latest}.created_at, {latest}.id)
       AND e.status <> %(running)s AND NOT e.diagnostic
       AND (%(since)s::timestamptz IS NULL OR e.created_at >= %(since)s::timestamptz) AND {since_repair}
     ORDER BY e.created_at DESC, e.id DESC LIMIT greatest({target}.k - 1, 0))"""
    since_repair = sql(
        "NOT EXISTS (SELECT 1 FROM {repair} rp WHERE rp.device_id = e.device_id AND rp.created_at > e.created_at)",
        repair=Repair._meta.db_table,
    )
    return sql(
        """(
    SELECT array_agg(r.status ORDER BY r.created_at DESC, r.id DESC) AS statuses,
           array_agg(r.passed ORDER BY r.created_at DESC, r.id DESC) AS passed,
           array_agg(r.current ORDER BY r.created_at DESC, r.id DESC) AS current,
           array_agg(r.materialised_at ORDER BY r.created_at DESC, r.id DESC) AS materialised
    FROM ({by_device} UNION ALL {by_topology}) r
)""",
        by_device=sql(branch.replace("{column}", "device_id"), target=target, latest=latest, since_repair=since_repair),
        by_topology=sql(branch.replace("{column}", "topology_id"), target=target, latest=latest, since_repair="true"),
    )


#: What `prior_runs_sql` gives a target of k = 1 (LIMIT 0: array_agg over no rows), as a constant
#: row with the same columns, for a statement none of whose targets counts prior runs.
NO_PRIOR_RUNS = (
    "(SELECT NULL::varchar[] AS statuses, NULL::boolean[] AS passed, NULL::boolean[] AS current,"
    " NULL::timestamptz[] AS materialised)"
)


@dataclass(frozen=True)
class SummaryRow:
    resource_class: str
    requirement: str
    gate: str
    counts: dict[str, int]

    @property
    def total(self) -> int:
        return sum(self.counts.values())


@dataclass(frozen=True)
class ProgressSummary:
    site_id: UUID
    site_slug: str
    rows: list[SummaryRow]


def progress_summary(*, site: Site) -> ProgressSummary:
    """Counts per resource class × requirement × verdict at a site (one query)."""
    rows: dict[tuple[str, str, str], dict[str, int]] = defaultdict(lambda: dict.fromkeys(Verdict.values, 0))
    counts = (
        PolicyProgress.objects.filter(site_id=site.id)
        .values("resource_class", "requirement__name", "gate", "verdict")
        .annotate(n=Count("id"))
        .order_by()
    )
    for entry in counts:
        rows[(entry["resource_class"], entry["requirement__name"], entry["gate"])][entry["verdict"]] = entry["n"]
    return ProgressSummary(
        site_id=site.id,
        site_slug=site.slug,
        rows=[SummaryRow(rc, name, gate, verdicts) for (rc, name, gate), verdicts in sorted(rows.items())],
    )


def satellite_resource_classes(satellite: Satellite) -> list[str]:
    """Every resource class in which this satellite has something to reconcile (one query): of
    the devices it manages, of the devices in topologies it manages, and of projection rows it
    still holds (so a scope whose last device left is still swept, and its rows cleaned up)."""
    managed = Device.objects.filter(satellite=satellite).values_list("resource_class", flat=True)
    in_topologies = Device.objects.filter(memberships__topology__satellite=satellite).values_list(
        "resource_class", flat=True
    )
    projected = PolicyProgress.objects.filter(satellite=satellite).values_list("resource_class", flat=True)
    return sorted(set(managed.order_by().union(in_topologies.order_by(), projected.order_by())))


def gpu_vendors(resource_classes: list[str]) -> dict[str, str]:
    """Each of these classes' GPU vendor, as its policy declares it (one query; a class without a policy is
    left out): what the agent reads a device's hardware with."""
    rows = AcceptancePolicy.objects.filter(resource_class__in=resource_classes).values_list(
        "resource_class", "gpu_vendor"
    )
    return dict(rows.order_by("resource_class"))


def execution_get(*, execution_id: UUID, actor: Actor) -> TestExecution:
    """One execution (404 when unknown, 403 for a satellite client of another site)."""
    execution = TestExecution.objects.select_related("requirement").filter(id=execution_id).first()
    if execution is None:
        raise NotFoundError(f"No execution {execution_id}.")
    ensure_site_allowed(actor, execution.site_id)
    return execution


def site_get(*, site_id: UUID, actor: Actor) -> Site:
    """A site named in a path (404 when unknown, 403 for a satellite client of another site)."""
    try:
        site = Site.objects.get(id=site_id)
    except Site.DoesNotExist:
        raise NotFoundError(f"No site {site_id}.") from None
    ensure_site_allowed(actor, site.id)
    return site
