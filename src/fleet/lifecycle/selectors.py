"""Reads of the lifecycle: a device's state history (newest first, keyset-paginated by the view)."""

from __future__ import annotations

from uuid import UUID

from django.db.models import QuerySet

from fleet.core.exceptions import NotFoundError
from fleet.inventory.identity import Actor, ensure_not_satellite, ensure_site_allowed
from fleet.inventory.models import Device
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
