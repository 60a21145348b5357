"""Inventory reads shared by several operations."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from uuid import UUID

from django.core.exceptions import ValidationError
from django.db.models import Count

from fleet.core.exceptions import NotFoundError
from fleet.inventory.identity import Actor, ensure_acts_as_satellite
from fleet.inventory.models import Device, Satellite, Site
from fleet_rules.vocabulary import DeviceState


class SiteNotFound(NotFoundError):
    """No site has this slug: a page says so and lists the sites there are."""


def site_by_slug(slug: str) -> Site:
    """The site a page's path names (`SiteNotFound` when there is none)."""
    try:
        return Site.objects.get(slug=slug)
    except Site.DoesNotExist:
        raise SiteNotFound(f"No site {slug!r}.") from None


def site_list() -> list[Site]:
    """Every site, by slug (one query): what a site filter may name."""
    return list(Site.objects.order_by("slug"))


def satellite_of_site(*, site_slug: str, satellite_name: str) -> Satellite:
    """The satellite named in a request, or a field error on whichever of the two is wrong."""
    satellite = Satellite.objects.select_related("site").filter(site__slug=site_slug, name=satellite_name).first()
    if satellite is not None:
        return satellite
    if not Site.objects.filter(slug=site_slug).exists():
        raise ValidationError({"site_slug": [f"No site with slug {site_slug!r}."]})
    raise ValidationError({"satellite_name": [f"No satellite {satellite_name!r} at site {site_slug!r}."]})


def satellite_acting(*, site_slug: str, satellite_name: str, actor: Actor) -> Satellite:
    """The satellite a request acts as: it must exist (field errors otherwise), and a satellite's
    client may act only as itself (403)."""
    satellite = satellite_of_site(site_slug=site_slug, satellite_name=satellite_name)
    ensure_acts_as_satellite(actor, satellite)
    return satellite


@dataclass(frozen=True)
class SatelliteSeen:
    name: str
    agent_version: str
    last_seen_at: datetime | None


@dataclass(frozen=True)
class SiteInventory:
    site: Site
    devices_by_state: dict[str, int]
    satellites: list[SatelliteSeen]

    @property
    def devices(self) -> int:
        return sum(self.devices_by_state.values())


def sites_inventory() -> list[SiteInventory]:
    """Every site with its devices by lifecycle state and its satellites (three queries)."""
    sites = list(Site.objects.order_by("slug"))
    states: dict[UUID, dict[str, int]] = defaultdict(lambda: dict.fromkeys(DeviceState.values, 0))
    for site_id, state, n in Device.objects.values_list("site_id", "state").annotate(n=Count("id")).order_by():
        states[site_id][state] = n
    satellites: dict[UUID, list[SatelliteSeen]] = defaultdict(list)
    for s in Satellite.objects.order_by("name"):
        satellites[s.site_id].append(SatelliteSeen(s.name, s.agent_version, s.last_seen_at))
    return [SiteInventory(site, dict(states[site.id]), satellites[site.id]) for site in sites]


def devices_in_repair(device_ids: Sequence[UUID]) -> list[str]:
    """The hostnames of these devices that are in needs_repair, sorted (one query)."""
    return sorted(
        Device.objects.filter(id__in=device_ids, state=DeviceState.NEEDS_REPAIR).values_list("hostname", flat=True)
    )
