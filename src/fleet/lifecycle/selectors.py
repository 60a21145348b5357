"""Reads of the lifecycle: a device's state history (newest first, keyset-paginated by the view),
and the states of a satellite's devices for its agent's node gate."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from uuid import UUID

from django.core.exceptions import ValidationError
from django.db.models import Case, CharField, OuterRef, QuerySet, Subquery, When
from django.db.models.functions import Left

from fleet.core.cursors import cursor_decode, cursor_encode
from fleet.core.exceptions import NotFoundError
from fleet.inventory.identity import Actor, ensure_not_satellite, ensure_site_allowed
from fleet.inventory.models import Device, Satellite
from fleet.lifecycle.models import DeviceStateChange, Repair
from fleet_rules.lifecycle import AUTOMATIC_CAUSES
from fleet_rules.vocabulary import DeviceState, TransitionCause


def device_for_lifecycle(*, device_id: UUID, actor: Actor) -> Device:
    """The device, if this caller may see its lifecycle (404 when unknown, 403 for satellites and
    other sites' clients)."""
    ensure_not_satellite(actor)
    device = Device.objects.filter(id=device_id).select_related("site").first()
    if device is None:
        raise NotFoundError(f"No device {device_id}.")
    ensure_site_allowed(actor, device.site_id)
    return device


def device_history(device: Device) -> QuerySet[DeviceStateChange]:
    return DeviceStateChange.objects.filter(device=device)


def device_repairs(device: Device) -> QuerySet[Repair]:
    return Repair.objects.filter(device=device)


def system_moved(device_ids: set[UUID]) -> dict[UUID, str]:
    """Of these devices, those whose latest state change the service made (a certificate, failures,
    isolation, a repair), with its cause (one query)."""
    if not device_ids:
        return {}
    latest = (
        DeviceStateChange.objects.filter(device_id__in=device_ids, held=False)
        .order_by("device_id", "-at", "-id")
        .distinct("device_id")
        .values_list("device_id", "cause")
    )
    service = {c.value for c in AUTOMATIC_CAUSES} | {TransitionCause.REPAIR.value}
    return {device_id: cause for device_id, cause in latest if cause in service}


def repair_entries() -> QuerySet[DeviceStateChange]:
    """The changes that sent devices to repair (not the moves the breaker held), newest first:
    where the repair queue, the repair form and the demo read why and since when."""
    return DeviceStateChange.objects.filter(to_state=DeviceState.NEEDS_REPAIR, held=False).order_by("-at", "-id")


#: How much of the change's reason the node gate is given: it writes a short scheduler reason.
NODE_WHY_MAX = 200


@dataclass(frozen=True)
class NodeState:
    """A device's lifecycle state as a satellite's node gate needs it: in `needs_repair`, why and
    since when (the change that sent it there; empty otherwise)."""

    device_id: UUID
    hostname: str
    state: str
    why: str
    since: datetime | None
    resource_class: str = ""


@dataclass(frozen=True)
class NodeStatesPage:
    items: list[NodeState]
    next_cursor: str | None


def satellite_node_states(*, satellite: Satellite, limit: int, cursor: str | None = None) -> NodeStatesPage:
    """One page of the satellite's devices by hostname, each with its state and, in needs_repair,
    why (one query whatever the page's size; `cursor` is signed and bound to this satellite)."""
    after = ""
    if cursor:
        payload = cursor_decode(cursor, purpose="node-states", restart_hint="Start again without a cursor.")
        if payload.get("satellite") != str(satellite.id):
            raise ValidationError({"cursor": ["This cursor belongs to another satellite's node states."]})
        after = str(payload.get("after", ""))
    entered = repair_entries().filter(device=OuterRef("pk"))
    in_repair = {"state": DeviceState.NEEDS_REPAIR}
    found = list(
        Device.objects.filter(satellite=satellite, hostname__gt=after)
        .annotate(
            why=Case(When(**in_repair, then=Left(Subquery(entered.values("reason")[:1]), NODE_WHY_MAX))),
            cause=Case(When(**in_repair, then=Subquery(entered.values("cause")[:1])), output_field=CharField()),
            since=Case(When(**in_repair, then=Subquery(entered.values("at")[:1]))),
        )
        .order_by("hostname")
        .values("id", "hostname", "state", "why", "cause", "since", "resource_class")[: limit + 1]
    )
    items = [
        NodeState(d["id"], d["hostname"], d["state"], d["why"] or d["cause"] or "", d["since"], d["resource_class"])
        for d in found[:limit]
    ]
    more = len(found) > limit and items
    next_cursor = (
        cursor_encode({"satellite": str(satellite.id), "after": items[-1].hostname}, purpose="node-states")
        if more
        else None
    )
    return NodeStatesPage(items, next_cursor)
