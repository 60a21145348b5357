"""Inventory reads shared by several operations."""

from __future__ import annotations

from django.core.exceptions import ValidationError

from fleet.inventory.identity import Actor, ensure_acts_as_satellite
from fleet.inventory.models import Satellite, Site


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
