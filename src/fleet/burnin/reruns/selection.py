"""What a person selects to rerun, and the devices it means: the one definition the dashboard's
rerun form and `fleet rerun` share. The API names its devices itself (`device_ids`), which is
the `devices` selection; `service.check_selection` then holds every selection to the site.

A selection may name *targets* — (device, requirement) pairs, the failures list's rows — and then
those devices are planned for those requirements only (`selection_only`); a device named whole is
planned for every requirement."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from uuid import UUID

from django.core.exceptions import ValidationError
from django.db.models import Q

from fleet.burnin.models import PolicyProgress
from fleet.inventory.models import Device, Site
from fleet.policies.models import Requirement
from fleet_rules.vocabulary import Verdict


@dataclass(frozen=True)
class RerunTarget:
    """One requirement of one device: a row of the failures list."""

    device: UUID
    requirement: str


@dataclass(frozen=True)
class RerunSelection:
    """Every device with a failed or errored requirement (`all_failed`), else the members of the
    site's topologies labelled `topology`, else `devices` and `targets` together (first that is set
    wins)."""

    all_failed: bool = False
    topology: str | None = None
    devices: tuple[UUID, ...] = ()
    targets: tuple[RerunTarget, ...] = ()


def selection_devices(site: Site, selection: RerunSelection) -> list[UUID]:
    """The devices a selection means at the site (one query, none for named devices and targets);
    empty when it holds none."""
    if selection.all_failed:
        return failing_devices(site)
    if selection.topology:
        return topology_devices(site, selection.topology)
    return list(dict.fromkeys([*selection.devices, *(t.device for t in selection.targets)]))


def selection_only(site: Site, selection: RerunSelection) -> dict[UUID, frozenset[str]]:
    """Device → the only requirements to plan for it, for devices the selection names by targets
    alone (a device also named whole is planned for everything); a target whose device is not at
    the site, or whose requirement its resource class does not have, is a `ValidationError` naming
    `target.N` (two queries; none without targets)."""
    if selection.all_failed or selection.topology or not selection.targets:
        return {}
    wanted = {t.device for t in selection.targets}
    devices = {d: (hostname, rc) for d, hostname, rc in _of_site(site, wanted)}
    names: dict[str, set[str]] = defaultdict(set)
    for rc, name in Requirement.objects.filter(
        policy__resource_class__in={rc for _, rc in devices.values()}, retired_at__isnull=True
    ).values_list("policy__resource_class", "name"):
        names[rc].add(name)
    problems: dict[str, list[str]] = {}
    only: dict[UUID, set[str]] = defaultdict(set)
    for index, target in enumerate(selection.targets):
        if target.device not in devices:
            problems[f"target.{index}"] = [f"{target.device} is not a device of site {site.slug}."]
            continue
        hostname, rc = devices[target.device]
        if target.requirement not in names[rc]:
            problems[f"target.{index}"] = [f"{hostname} ({rc}) has no requirement {target.requirement!r}."]
            continue
        only[target.device].add(target.requirement)
    if problems:
        raise ValidationError(problems)
    whole = set(selection.devices)
    return {device: frozenset(requirements) for device, requirements in only.items() if device not in whole}


def _of_site(site: Site, ids: set[UUID]) -> list[tuple[UUID, str, str]]:
    return list(Device.objects.filter(site=site, id__in=list(ids)).values_list("id", "hostname", "resource_class"))


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
