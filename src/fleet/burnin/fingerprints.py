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

from django.core.exceptions import ValidationError
from django.db import transaction
from django.db.models import Count, F, Window

from fleet.burnin.models import AcceptanceCertificate, FingerprintSnapshot
from fleet.core.exceptions import NotFoundError
from fleet.inventory.identity import Actor, site_restriction
from fleet.inventory.models import Device, Satellite
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
    *, device_id: UUID, inventory: Mapping[str, Any], execution_id: UUID | None = None, now: datetime
) -> Observed:
    """Record that the device reported `inventory` with this execution (in the caller's
    transaction, after the execution is written), or outside any job (`execution_id` None: the
    agent's inventory sweep; `fingerprints_observe` takes a batch of those)."""
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


def _seen_again(device_id: UUID, digest: str, execution_id: UUID | None, now: datetime) -> bool:
    """Whether the device's current snapshot has this hash (then this report is counted)."""
    current = FingerprintSnapshot.objects.filter(device_id=device_id, replaced_at__isnull=True, sha256=digest)
    if execution_id is None:  # read outside any job: seen, but no execution report to count
        return current.update(last_seen_at=now) > 0
    return current.update(last_seen_at=now, last_execution_id=execution_id, reports=F("reports") + 1) > 0


def _supersede(device_id: UUID, serial: UUID, found: list[rules.Change], digest: str, now: datetime) -> None:
    _supersede_all([(device_id, serial, found, digest)], now)


def _supersede_all(superseded: Sequence[tuple[UUID, UUID, list[rules.Change], str]], now: datetime) -> None:
    """Supersede these certificates (`hardware_changed`) and lift their devices (two statements)."""
    if not superseded:
        return
    reason = SupersedeReason.HARDWARE_CHANGED
    AcceptanceCertificate.objects.filter(
        serial__in=[serial for _, serial, _, _ in superseded], superseded_at__isnull=True
    ).update(superseded_at=now, supersede_reason=reason)
    automatic_moves_apply(
        [
            AutomaticMove(
                device_id,
                DeviceState.BURN_IN,
                TransitionCause.CERTIFICATE_SUPERSEDED,
                f"certificate {serial} superseded: {reason.value} ({rules.summary(found)})",
                {"certificate": str(serial), "supersede_reason": reason.value, "fingerprint": digest},
            )
            for device_id, serial, found, digest in superseded
        ],
        now=now,
    )


#: Devices one `fingerprints_observe` call (one sweep request) may carry.
MAX_BATCH = 100


def fingerprints_observe(
    *, observations: Sequence[tuple[UUID, Mapping[str, Any]]], now: datetime
) -> dict[UUID, Observed]:
    """Record inventories read outside any job (the agent's inventory sweep), one per device, in the
    caller's transaction: what `fingerprint_observe` does for each (without an execution: an
    unchanged one moves `last_seen_at` only; a new one has no first or last execution and counts
    one report), in a constant number of
    statements whatever the batch holds (lock the devices, read their current snapshots, count the
    unchanged, replace the changed, read and supersede the certificates they no longer match)."""
    if not observations:
        return {}
    digests = {
        device_id: (rules.canonical(inventory), rules.sha256(inventory)) for device_id, inventory in observations
    }
    ids = sorted(digests)
    list(Device.objects.select_for_update(no_key=True).filter(id__in=ids).order_by("id").values_list("id", flat=True))
    currents = {
        snapshot.device_id: snapshot
        for snapshot in FingerprintSnapshot.objects.filter(device_id__in=ids, replaced_at__isnull=True).only(
            "id", "device_id", "sha256", "inventory"
        )
    }
    same = [d for d in ids if d in currents and currents[d].sha256 == digests[d][1]]
    moved = [d for d in ids if d not in same]
    if same:
        # seen again (`last_seen_at`, what repair checks read); `reports` and `last_execution` count
        # execution reports, and this is none
        FingerprintSnapshot.objects.filter(id__in=[currents[d].id for d in same]).update(last_seen_at=now)
    observed = {d: Observed(digests[d][1], created=False) for d in same}
    if not moved:
        return observed
    replaced = [currents[d].id for d in moved if d in currents]
    if replaced:
        FingerprintSnapshot.objects.filter(id__in=replaced).update(replaced_at=now)
    stored = {d: json.loads(digests[d][0]) for d in moved}
    FingerprintSnapshot.objects.bulk_create(
        FingerprintSnapshot(
            device_id=d,
            sha256=digests[d][1],
            canonical=digests[d][0].decode(),
            inventory=stored[d],
            first_seen_at=now,
            last_seen_at=now,
        )
        for d in moved
    )
    certificates = {
        c.device_id: c
        for c in AcceptanceCertificate.objects.filter(device_id__in=moved, superseded_at__isnull=True).only(
            "serial", "device_id", "document"
        )
    }
    superseded: list[tuple[UUID, UUID, list[rules.Change], str]] = []
    for d in moved:
        certificate = certificates.get(d)
        previous = currents.get(d)
        found = (
            rules.hardware_supersedes(
                bound=bound_inventory(certificate.document),
                previous=previous.inventory if previous is not None else None,
                new=stored[d],
            )
            if certificate is not None
            else []
        )
        if certificate is not None and found:
            superseded.append((d, certificate.serial, found, digests[d][1]))
            observed[d] = Observed(digests[d][1], created=True, superseded=certificate.serial, changes=tuple(found))
        else:
            observed[d] = Observed(digests[d][1], created=True)
    _supersede_all(superseded, now)
    return observed


@dataclass(frozen=True)
class SweptDevice:
    hostname: str
    device_id: UUID
    sha256: str
    created: bool
    superseded: UUID | None


@transaction.atomic
def satellite_fingerprints_report(
    *, satellite: Satellite, devices: Sequence[Mapping[str, Any]], now: datetime
) -> list[SweptDevice]:
    """A satellite's inventory sweep: `devices` (validated `{hostname, inventory}`, hostnames
    distinct) must all be the satellite's own, else a 400 naming each stranger and nothing written."""
    hostnames = [str(item["hostname"]) for item in devices]
    known = dict(Device.objects.filter(satellite=satellite, hostname__in=hostnames).values_list("hostname", "id"))
    strangers = {
        f"devices.{i}.hostname": [f"No device {hostname!r} managed by satellite {satellite.name}."]
        for i, hostname in enumerate(hostnames)
        if hostname not in known
    }
    if strangers:
        raise ValidationError(strangers)
    observed = fingerprints_observe(
        observations=[(known[str(item["hostname"])], item["inventory"]) for item in devices], now=now
    )
    return [
        SweptDevice(h, known[h], observed[known[h]].sha256, observed[known[h]].created, observed[known[h]].superseded)
        for h in hostnames
    ]


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
