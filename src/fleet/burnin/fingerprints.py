"""Hardware fingerprints: the inventory an agent reports with a device's executions, kept as
snapshots (a new row only when its hash moves), checked against the certificate that binds one,
and read back with what changed (`fleet_rules.fingerprint` decides; this loads and writes).

A report whose fingerprint is the device's current one costs one statement (the current row's
`last_seen_*` follow). A new fingerprint locks the device (as certificate issuance does, so the
two decide one after the other), replaces the current row and, when the device's current
certificate binds other hardware, supersedes it (`hardware_changed`) and lifts the device through
the lifecycle (accepted → burn-in; in service it stays, without a valid certificate): a constant
number of statements whatever the inventory holds.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from uuid import UUID

from django.db.models import Count, F, Window

from fleet.burnin.models import AcceptanceCertificate, FingerprintSnapshot
from fleet.core.exceptions import NotFoundError
from fleet.inventory.identity import Actor, site_restriction
from fleet.inventory.models import Device
from fleet.lifecycle.services import AutomaticMove, automatic_moves_apply
from fleet_rules import fingerprint as rules
from fleet_rules.vocabulary import DeviceState, SupersedeReason, TransitionCause

#: Snapshots the device page, the API and the evidence pack read (newest first; one more is read to
#: tell what the oldest shown changed).
HISTORY_LIMIT = 20


@dataclass(frozen=True)
class Observed:
    """What one report's inventory did: its hash, whether it made a new snapshot, and the
    certificate it superseded (with the changes that did it)."""

    sha256: str
    created: bool
    superseded: UUID | None = None
    changes: tuple[rules.Change, ...] = ()


def bound_inventory(document: Mapping[str, Any]) -> dict[str, Any] | None:
    """The inventory a certificate document binds (None: issued before fingerprints, or the device
    had none)."""
    bound = document.get("fingerprint")
    return bound.get("inventory") if isinstance(bound, Mapping) else None


def fingerprint_observe(
    *, device_id: UUID, inventory: Mapping[str, Any], execution_id: UUID, now: datetime
) -> Observed:
    """Record that the device reported `inventory` with this execution (in the caller's
    transaction, after the execution is written)."""
    canonical = rules.canonical(inventory)
    digest = rules.sha256(inventory)
    if _seen_again(device_id, digest, execution_id, now):
        return Observed(digest, created=False)
    # A new fingerprint (or the first): decide under the device's lock, as issuance does.
    Device.objects.select_for_update(no_key=True).filter(id=device_id).values_list("id", flat=True).first()
    current = FingerprintSnapshot.objects.filter(device_id=device_id, replaced_at__isnull=True).first()
    if current is not None and current.sha256 == digest:  # a concurrent report recorded it first
        _seen_again(device_id, digest, execution_id, now)
        return Observed(digest, created=False)
    if current is not None:
        FingerprintSnapshot.objects.filter(id=current.id).update(replaced_at=now)
    stored = json.loads(canonical)
    FingerprintSnapshot.objects.create(
        device_id=device_id,
        sha256=digest,
        canonical=canonical.decode(),
        inventory=stored,
        first_seen_at=now,
        first_execution_id=execution_id,
        last_seen_at=now,
        last_execution_id=execution_id,
    )
    certificate = (
        AcceptanceCertificate.objects.filter(device_id=device_id, superseded_at__isnull=True)
        .only("serial", "document")
        .first()
    )
    if certificate is None:
        return Observed(digest, created=True)
    found = rules.hardware_supersedes(
        bound=bound_inventory(certificate.document),
        previous=current.inventory if current is not None else None,
        new=stored,
    )
    if not found:
        return Observed(digest, created=True)
    _supersede(device_id, certificate.serial, found, digest, now)
    return Observed(digest, created=True, superseded=certificate.serial, changes=tuple(found))


def _seen_again(device_id: UUID, digest: str, execution_id: UUID, now: datetime) -> bool:
    """Whether the device's current snapshot has this hash (then this report is counted)."""
    current = FingerprintSnapshot.objects.filter(device_id=device_id, replaced_at__isnull=True, sha256=digest)
    return current.update(last_seen_at=now, last_execution_id=execution_id, reports=F("reports") + 1) > 0


def _supersede(device_id: UUID, serial: UUID, found: list[rules.Change], digest: str, now: datetime) -> None:
    reason = SupersedeReason.HARDWARE_CHANGED
    AcceptanceCertificate.objects.filter(serial=serial, superseded_at__isnull=True).update(
        superseded_at=now, supersede_reason=reason
    )
    automatic_moves_apply(
        [
            AutomaticMove(
                device_id,
                DeviceState.BURN_IN,
                TransitionCause.CERTIFICATE_SUPERSEDED,
                f"certificate {serial} superseded: {reason.value} ({rules.summary(found)})",
                {"certificate": str(serial), "supersede_reason": reason.value, "fingerprint": digest},
            )
        ],
        now=now,
    )


# --- reads ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class SnapshotRead:
    """One snapshot of a device's history, with what changed since the one before it."""

    id: UUID
    sha256: str
    inventory: dict[str, Any]
    first_seen_at: datetime
    last_seen_at: datetime
    first_execution_id: UUID | None
    last_execution_id: UUID | None
    reports: int
    current: bool
    changes: tuple[rules.Change, ...]  # since the previous snapshot; empty for the first
    first: bool  # the device's first snapshot (nothing before it)

    @property
    def superseding(self) -> bool:
        return any(change.supersedes for change in self.changes)


@dataclass(frozen=True)
class FingerprintHistory:
    fingerprints: list[SnapshotRead]  # newest first
    truncated: bool  # older snapshots exist beyond these
    total: int = 0  # every snapshot of the device

    @property
    def current(self) -> SnapshotRead | None:
        return self.fingerprints[0] if self.fingerprints and self.fingerprints[0].current else None


def fingerprint_history(device_id: UUID, *, limit: int = HISTORY_LIMIT) -> FingerprintHistory:
    """The device's newest `limit` snapshots, newest first, each with its changes (one query)."""
    snapshots = list(
        FingerprintSnapshot.objects.filter(device_id=device_id)
        .annotate(total=Window(Count("id")))  # all of them, counted before the limit
        .order_by("-first_seen_at", "-id")[: limit + 1]
    )
    truncated = len(snapshots) > limit
    total = int(snapshots[0].total) if snapshots else 0
    return FingerprintHistory(list(_reads(snapshots, complete=not truncated))[:limit], truncated, total)


def device_fingerprints(*, device_id: UUID, actor: Actor) -> FingerprintHistory:
    """The API's read: a device by id as the devices API finds it (another site's satellite client
    finds none: a 404), and its fingerprint history."""
    restricted = site_restriction(actor)
    found = Device.objects.filter(id=device_id)
    if restricted is not None:
        found = found.filter(site_id=restricted)
    if not found.exists():
        raise NotFoundError(f"No device {device_id}.")
    return fingerprint_history(device_id)


def _reads(snapshots: Sequence[FingerprintSnapshot], *, complete: bool) -> Iterable[SnapshotRead]:
    for index, snapshot in enumerate(snapshots):
        before = snapshots[index + 1] if index + 1 < len(snapshots) else None
        yield SnapshotRead(
            id=snapshot.id,
            sha256=snapshot.sha256,
            inventory=rules.normalised(snapshot.inventory),
            first_seen_at=snapshot.first_seen_at,
            last_seen_at=snapshot.last_seen_at,
            first_execution_id=snapshot.first_execution_id,
            last_execution_id=snapshot.last_execution_id,
            reports=snapshot.reports,
            current=snapshot.replaced_at is None,
            changes=tuple(rules.changes(before.inventory, snapshot.inventory)) if before is not None else (),
            first=before is None and complete,
        )


#: Snapshots read to check repairs against (a device's hardware changes a few times, not hundreds).
REPAIR_CHECK_LIMIT = 50


def snapshots_seen_since(device_id: UUID, since: datetime | None) -> list[tuple[datetime, dict[str, Any]]]:
    """The device's snapshots still reported after `since` (None: none), oldest first, as
    (last seen, inventory): what `read_after` picks a repair's check from. One query."""
    if since is None:
        return []
    seen = (
        FingerprintSnapshot.objects.filter(device_id=device_id, last_seen_at__gt=since)
        .order_by("first_seen_at", "id")
        .values_list("last_seen_at", "inventory")[:REPAIR_CHECK_LIMIT]
    )
    return list(seen)


def read_after(snapshots: list[tuple[datetime, dict[str, Any]]], moment: datetime) -> dict[str, Any] | None:
    """The inventory first reported after `moment` (a repair's time), or None."""
    return next((inventory for last_seen, inventory in snapshots if last_seen > moment), None)
