"""What a site's filters may name (the grid's and the failures list's): the values that exist, so
a filter is a choice among them and an unknown value is refused by name, never an empty page."""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple
from uuid import UUID

from django.db.models import Count, Exists, OuterRef, QuerySet

from fleet.burnin.models import PolicyProgress
from fleet.inventory.models import Device, Satellite, Site, Topology, TopologyMembership
from fleet.inventory.selectors import site_by_slug
from fleet.policies.models import Requirement
from fleet_rules.vocabulary import Verdict

NOT_PASSING = (Verdict.FAILED, Verdict.ERRORED)


@dataclass(frozen=True)
class SiteFilterValues:
    site: Site
    resource_classes: tuple[str, ...]  # with devices at the site, sorted
    requirements: tuple[tuple[str, str], ...]  # (resource class, requirement) of those classes, not retired
    satellites: tuple[str, ...]
    #: The class the grid opens on: the most failed or errored targets, else the first ("" without devices).
    troubled_class: str = ""

    def requirement_names(self, resource_class: str | None = None) -> list[str]:
        """The requirements of one class, or of every class at the site."""
        return sorted({name for rc, name in self.requirements if resource_class in (None, rc)})


def site_filter_values(slug: str, *, with_troubled_class: bool = False) -> SiteFilterValues:
    """The site and what its filters may name (four queries, five with the troubled class)."""
    site = site_by_slug(slug)
    classes = tuple(
        Device.objects.filter(site=site).order_by("resource_class").values_list("resource_class", flat=True).distinct()
    )
    requirements = tuple(
        Requirement.objects.filter(policy__resource_class__in=classes, retired_at__isnull=True)
        .order_by("policy__resource_class", "name")
        .values_list("policy__resource_class", "name")
    )
    satellites = tuple(Satellite.objects.filter(site=site).order_by("name").values_list("name", flat=True))
    troubled = troubled_class(site, classes) if with_troubled_class else ""
    return SiteFilterValues(site, classes, requirements, satellites, troubled)


def troubled_class(site: Site, classes: tuple[str, ...]) -> str:
    """The class with the most failed or errored targets at the site (the first by name among
    equals), else the first class (one query)."""
    # Counted by requirement (the site-verdict index holds it: an index-only range of the failing
    # rows), whose policy names the row's class; the row's own class is in the heap (0.12 s at 100,000).
    counts = (
        PolicyProgress.objects.filter(
            site=site, verdict__in=NOT_PASSING, requirement__policy__resource_class__in=classes
        )
        .values_list("requirement__policy__resource_class")
        .annotate(n=Count("*"))
        .order_by("-n", "requirement__policy__resource_class")
    )
    worst = counts.first()
    return worst[0] if worst else (classes[0] if classes else "")


class RackChoice(NamedTuple):
    id: UUID
    unit: str
    label: str


#: Racks a picker lists. A class with more (12,500 racks at 100,000 devices: 2 MB of options on
#: every grid page) is filtered by typing a rack's label, checked by `scoped_rack_named`.
RACK_CHOICES = 200


def _scoped(site: Site, resource_class: str, satellite: str | None) -> QuerySet[Topology]:
    """The site's topologies (racks, NVLink domains, pods) holding a device of the class, and of
    the satellite when one is named (a probe per topology, not a scan of the devices)."""
    members = TopologyMembership.objects.filter(topology=OuterRef("pk"), device__resource_class=resource_class)
    if satellite:
        members = members.filter(device__satellite__name=satellite)
    return Topology.objects.filter(site=site).filter(Exists(members))


@dataclass(frozen=True)
class RackChoices:
    choices: list[RackChoice]  # the first `RACK_CHOICES`, by unit and label
    more: bool  # more exist than are listed


def scoped_racks(site: Site, resource_class: str, satellite: str | None) -> RackChoices:
    """What the grid's rack filter and rack picker may offer: the first `RACK_CHOICES` scoped
    topologies by unit and label (one query)."""
    listed = list(
        _scoped(site, resource_class, satellite)
        .order_by("unit", "label")
        .values_list("id", "unit", "label", named=True)[: RACK_CHOICES + 1]
    )
    choices = [RackChoice(r.id, r.unit, r.label) for r in listed]
    return RackChoices(choices[:RACK_CHOICES], len(choices) > RACK_CHOICES)


def scoped_rack_named(site: Site, resource_class: str, satellite: str | None, label: str) -> bool:
    """Whether a scoped topology has this label (one query)."""
    return _scoped(site, resource_class, satellite).filter(label=label).exists()
