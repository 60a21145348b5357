"""What a person selects to rerun, and the devices it means: the one definition the dashboard's
rerun form and `fleet rerun` share. The API names its devices itself (`device_ids`), which is
the `devices` selection; `service.check_selection` then holds every selection to the site."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from uuid import UUID

from django.db.models import Q

from fleet.burnin.models import PolicyProgress
from fleet.inventory.models import Device, Site
from fleet_rules.vocabulary import Verdict


@dataclass(frozen=True)
class RerunSelection:
    """Every device with a failed or errored requirement (`all_failed`), else the members of the
    site's topologies labelled `topology`, else `devices` (first that is set wins)."""

    all_failed: bool = False
    topology: str | None = None
    devices: tuple[UUID, ...] = ()


def selection_devices(site: Site, selection: RerunSelection) -> list[UUID]:
    """The devices a selection means at the site (one query, none for named devices); empty when
    it holds none."""
    if selection.all_failed:
        return failing_devices(site)
    if selection.topology:
        return topology_devices(site, selection.topology)
    return list(selection.devices)


def failing_devices(site: Site) -> list[UUID]:
    """Every device at the site with a failed or errored requirement, its own or its rack's (one
    query)."""
    failing = PolicyProgress.objects.filter(site=site, verdict__in=[Verdict.FAILED, Verdict.ERRORED])
    return list(
        Device.objects.filter(site=site)
        .filter(
            Q(id__in=failing.filter(device__isnull=False).values("device_id"))
            | Q(memberships__topology_id__in=failing.filter(topology__isnull=False).values("topology_id"))
        )
        .distinct()
        .order_by("hostname")
        .values_list("id", flat=True)
    )


def topology_devices(site: Site, label: str) -> list[UUID]:
    """Every device of the site's topologies with this label (one query); empty if there is none."""
    return list(
        Device.objects.filter(site=site, memberships__topology__label=label)
        .distinct()
        .order_by("hostname")
        .values_list("id", flat=True)
    )


def device_hostnames(device_ids: Iterable[UUID]) -> dict[UUID, str]:
    """id → hostname of these devices (one query), for naming a selection back to a person."""
    return dict(Device.objects.filter(id__in=list(device_ids)).values_list("id", "hostname"))
