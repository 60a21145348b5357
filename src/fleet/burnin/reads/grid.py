"""The grid (`/sites/<slug>/grid/`): device × requirement, keyset-paginated by hostname, with the
cells whose device is an outlier among its siblings marked."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from uuid import UUID

from django.db.models import Q

from fleet.burnin.diagnosis.outliers import site_outlier_groups
from fleet.burnin.models import PolicyProgress
from fleet.burnin.reads.cohorts import cohort_blockers
from fleet.burnin.reads.filters import RackChoice, SiteFilterValues
from fleet.inventory.models import Device, Site, TopologyMembership
from fleet.policies.models import Requirement
from fleet_rules.eligibility import is_enrolled
from fleet_rules.vocabulary import DeviceState, RequirementScope, Verdict


@dataclass(frozen=True)
class GridColumn:
    requirement_id: UUID
    name: str
    gate: str
    unit: str | None  # multi-node requirements name a topology unit


@dataclass(frozen=True)
class GridCell:
    requirement: str
    verdict: str  # a Verdict, or "" when the device has no target for the requirement (no topology)
    execution_id: UUID | None = None
    topology_label: str | None = None  # for multi-node requirements: the cohort the cell is the verdict of
    blocked: str = ""  # a rack that has not run: who blocks it (`cohort_blockers`)


@dataclass(frozen=True)
class GridRow:
    device_id: UUID
    hostname: str
    satellite: str
    topologies: dict[str, tuple[UUID, str]]  # unit → (id, label)
    cells: list[GridCell]
    enrolled: bool = True  # False: a spare, no burn-in target (its cells show no verdict)
    state: str = ""


@dataclass(frozen=True)
class GridFilters:
    resource_class: str
    topology: str | None = None  # a topology label
    verdict: str | None = None
    satellite: str | None = None


@dataclass(frozen=True)
class GridPage:
    columns: list[GridColumn]
    rows: list[GridRow]
    next_after: str | None  # the hostname the next page starts after
    #: The racks (and domains, pods) of the filtered class and satellite: what the pickers offer
    #: (the first `RACK_CHOICES` of them when `more_racks`).
    topologies: Sequence[RackChoice] = field(default_factory=list)
    more_racks: bool = False
    #: The racks of this page's devices: what the rerun picker offers when `more_racks`.
    page_racks: Sequence[RackChoice] = field(default_factory=list)

    @property
    def rerun_racks(self) -> Sequence[RackChoice]:
        return self.page_racks if self.more_racks else self.topologies


def site_grid(
    site: Site,
    filters: GridFilters,
    *,
    racks: Sequence[RackChoice] = (),
    more_racks: bool = False,
    after: str | None,
    limit: int,
) -> GridPage:
    """One page of the device × requirement grid, keyset-paginated by hostname (six queries). A
    device that is not enrolled (a staged spare) is no target: its cells show no verdict, not even
    its rack's."""
    columns = [
        GridColumn(r.id, r.name, r.gate, r.unit if r.scope == RequirementScope.MULTI_NODE else None)
        for r in Requirement.objects.filter(
            policy__resource_class=filters.resource_class, retired_at__isnull=True
        ).order_by("gate", "name")
    ]
    devices_q = Device.objects.filter(site=site, resource_class=filters.resource_class).select_related("satellite")
    if filters.satellite:
        devices_q = devices_q.filter(satellite__name=filters.satellite)
    if filters.topology:
        devices_q = devices_q.filter(memberships__topology__label=filters.topology)
    if filters.verdict:
        # Exactly the rows that show a cell of this verdict: a row of one of the page's columns,
        # of the device or of a topology it is an enrolled member of (a spare racked with a failed
        # rack shows no verdict at all, so it is not a row of "failed").
        with_verdict = PolicyProgress.objects.filter(
            site=site, verdict=filters.verdict, requirement_id__in=[c.requirement_id for c in columns]
        )
        devices_q = devices_q.filter(
            Q(id__in=with_verdict.filter(device__isnull=False).values("device_id"))
            | (
                Q(memberships__topology_id__in=with_verdict.filter(topology__isnull=False).values("topology_id"))
                & Q(enrolled_at__isnull=False)
                & ~Q(state=DeviceState.DECOMMISSIONED)  # `fleet_rules.eligibility.is_enrolled`
            )
        )
    if after:
        devices_q = devices_q.filter(hostname__gt=after)
    devices = list(devices_q.distinct().order_by("hostname")[: limit + 1])
    has_more = len(devices) > limit
    devices = devices[:limit]
    memberships: dict[UUID, dict[str, tuple[UUID, str]]] = defaultdict(dict)
    for device_id, unit, topology_id, label in TopologyMembership.objects.filter(
        device_id__in=[d.id for d in devices]
    ).values_list("device_id", "unit", "topology_id", "topology__label"):
        memberships[device_id][unit] = (topology_id, label)
    targets = {d.id for d in devices} | {t for units in memberships.values() for t, _ in units.values()}
    rows_by_key = {
        (requirement_id, target_id): (verdict, execution_id)
        for requirement_id, target_id, verdict, execution_id in PolicyProgress.objects.filter(
            requirement_id__in=[c.requirement_id for c in columns], target_id__in=targets
        ).values_list("requirement_id", "target_id", "verdict", "execution_id")
    }
    enrolled = {d.id for d in devices if is_enrolled(enrolled_at=d.enrolled_at, state=d.state)}
    waiting = set()  # the racks on this page that have not run
    for device_id, units in memberships.items():
        for c in columns:
            if device_id in enrolled and c.unit in units:
                topology_id = units[c.unit][0]
                if rows_by_key.get((c.requirement_id, topology_id), (Verdict.NOT_RUN,))[0] == Verdict.NOT_RUN:
                    waiting.add((topology_id, filters.resource_class))
    blocked = cohort_blockers(waiting)
    grid_rows = []
    for device in devices:
        units = memberships.get(device.id, {})
        cells = []
        for column in columns:
            if device.id not in enrolled:
                cells.append(GridCell(column.name, ""))
            elif column.unit is None:
                verdict, execution = rows_by_key.get((column.requirement_id, device.id), (Verdict.NOT_RUN, None))
                cells.append(GridCell(column.name, verdict, execution))
            elif column.unit in units:
                topology_id, label = units[column.unit]
                verdict, execution = rows_by_key.get((column.requirement_id, topology_id), (Verdict.NOT_RUN, None))
                why = blocked.get((topology_id, filters.resource_class)) if verdict == Verdict.NOT_RUN else None
                cells.append(GridCell(column.name, verdict, execution, label, why.text if why else ""))
            else:
                cells.append(GridCell(column.name, ""))
        grid_rows.append(
            GridRow(
                device.id, device.hostname, device.satellite.name, units, cells, device.id in enrolled, device.state
            )
        )
    page_racks = sorted(
        {
            RackChoice(t, unit, label)
            for d in devices
            if d.id in enrolled
            for unit, (t, label) in memberships[d.id].items()
        },
        key=lambda r: (r.unit, r.label),
    )
    return GridPage(
        columns, grid_rows, devices[-1].hostname if has_more and devices else None, racks, more_racks, page_racks
    )


def outlier_marks(site: Site, resource_class: str) -> dict[str, dict[str, tuple[float, float]]]:
    """hostname → requirement → (the farthest robust z where the device is an outlier, the k it is
    beyond) (3 queries)."""
    marks: dict[str, dict[str, tuple[float, float]]] = {}
    for group in site_outlier_groups(site=site, resource_class=resource_class or None):
        for o in group.verdict.outliers:
            by_requirement = marks.setdefault(o.hostname, {})
            current = by_requirement.get(group.key.requirement)
            if current is None or abs(o.robust_z) > abs(current[0]):
                by_requirement[group.key.requirement] = (o.robust_z, group.key.k)
    return marks


@dataclass(frozen=True)
class GridPageRead:
    site: Site
    classes: Sequence[str]  # every resource class with devices at the site
    filters: GridFilters  # as applied: the resource class defaults to the class in trouble
    grid: GridPage
    outlier_marks: dict[str, dict[str, tuple[float, float]]]  # (robust z, k)


def grid_page(
    known: SiteFilterValues,
    filters: GridFilters,
    *,
    racks: Sequence[RackChoice],
    more_racks: bool = False,
    after: str | None,
    limit: int,
) -> GridPageRead:
    """One page of the grid of the chosen class (its filters parsed against `known`, the site's
    filter values, and its racks against `racks`) and its outlier marks: eight queries."""
    grid = site_grid(known.site, filters, racks=racks, more_racks=more_racks, after=after, limit=limit)
    return GridPageRead(
        known.site, known.resource_classes, filters, grid, outlier_marks(known.site, filters.resource_class)
    )
