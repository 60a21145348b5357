"""The acceptance gate: a device moves to lifecycle state `accepted` only while it holds a valid
certificate, or by an explicit override that records who forced it and why. The one rule for
the API, the fleet file and the admin."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from uuid import UUID

from django.db import transaction
from django.utils import timezone

from fleet.burnin.certificates.reads import valid_now
from fleet.burnin.models import AcceptanceCertificate, AcceptanceOverride
from fleet.core.exceptions import Conflict
from fleet.inventory.models import Device
from fleet.lifecycle.services import AcceptanceGate, device_move
from fleet_rules.vocabulary import DeviceState

#: People need this permission to force an acceptance (machine clients need the `job:create` scope).
OVERRIDE_PERMISSION = "burnin.add_acceptanceoverride"


def refusal(hostname: str) -> str:
    return (
        f"Device {hostname} holds no valid acceptance certificate, so it cannot move to accepted. Let burn-in "
        "finish (every requirement of its policy passed at the current version), or override explicitly with "
        "force and a reason (recorded)."
    )


def uncertified(device_ids: Iterable[UUID]) -> set[UUID]:
    """Which of these devices hold no valid certificate (one query)."""
    wanted = set(device_ids)
    if not wanted:
        return set()
    held = set(
        AcceptanceCertificate.objects.filter(valid_now(), device_id__in=wanted).values_list("device_id", flat=True)
    )
    return wanted - held


def overrides_record(*, device_ids: Iterable[UUID], actor: str, reason: str) -> None:
    now = timezone.now()
    AcceptanceOverride.objects.bulk_create(
        [AcceptanceOverride(device_id=d, actor=actor, reason=reason, created_at=now) for d in device_ids]
    )


def override_record(*, device_id: UUID, actor: str, reason: str) -> AcceptanceOverride:
    return AcceptanceOverride.objects.create(device_id=device_id, actor=actor, reason=reason, created_at=timezone.now())


#: The gate the lifecycle asks (registered in `BurninConfig.ready`).
GATE = AcceptanceGate(uncertified=uncertified, override_record=override_record, override_permission=OVERRIDE_PERMISSION)


@dataclass(frozen=True)
class Accepted:
    device: Device
    changed: bool
    override: AcceptanceOverride | None


@transaction.atomic
def device_accept(*, device_id: UUID, actor: str, force: bool = False, reason: str = "") -> Accepted:
    """Move one device to `accepted` (409 without a valid certificate unless forced, or when the
    lifecycle table refuses the move; a forced acceptance needs a reason and is recorded)."""
    device = Device.objects.get(id=device_id)  # the move compare-and-sets the state read here
    if device.state == DeviceState.ACCEPTED:
        return Accepted(device, False, None)
    if not force and uncertified([device.id]):
        raise Conflict(refusal(device.hostname))
    moved = device_move(device_id=device.id, to=DeviceState.ACCEPTED, actor=actor, reason=reason, force=force)
    return Accepted(moved.device, True, moved.override)
