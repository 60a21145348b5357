"""Hardware fingerprints: the inventory an agent reports with a device's executions, kept as
snapshots (a new row only when its hash moves), checked against the certificate that binds one,
and read back with what changed (`fleet_rules.fingerprint` decides; this loads and writes).

A report whose fingerprint is the device's current one costs one statement (the current row's
`last_seen_*` follow); the agent's inventory sweep records a batch by the same rule. A new
fingerprint locks the device (as certificate issuance does, so the two decide one after the
other), replaces the current row and, when the device's current certificate binds other hardware,
supersedes it (`hardware_changed`) and lifts the device through the lifecycle (accepted → burn-in;
in service it stays, without a valid certificate): a constant number of statements whatever the
inventory or the batch holds.
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
from django.db.models import Case, Count, F, QuerySet, UUIDField, Value, When, Window

from fleet.burnin.models import AcceptanceCertificate, FingerprintSnapshot
from fleet.burnin.supersession import Supersession, certificates_supersede
from fleet.core.exceptions import NotFoundError
from fleet.core.locks import lock_keys_in_pk_order
from fleet.inventory.identity import Actor, ensure_reaches, restrict
from fleet.inventory.models import Device, Satellite
from fleet_rules import fingerprint as rules
from fleet_rules.vocabulary import SupersedeReason

#: Snapshots the device page, the API and the evidence pack read (newest first; one more is read to
#: tell what the oldest shown changed).
HISTORY_LIMIT = 20


@dataclass(frozen=True)
class Observation:
    """One device's inventory as read: with an execution report (`execution_id`), or by the
    agent's inventory sweep outside any job (None). Canonicalised and hashed once, here."""

    device_id: UUID
    canonical: bytes
    sha256: str
    execution_id: UUID | None = None

    @classmethod
    def of(cls, device_id: UUID, inventory: Mapping[str, Any], execution_id: UUID | None = None) -> Observation:
        canonical = rules.canonical(inventory)
        return cls(device_id, canonical, rules.digest(canonical), execution_id)


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


def fingerprint_observe(observation: Observation, *, now: datetime) -> Observed:
    """Record one device's inventory (an execution report's, in its transaction after the
    execution is written): `fingerprints_observe` of one."""
    return fingerprints_observe([observation], now=now)[observation.device_id]


#: Devices one `fingerprints_observe` call (one sweep request) may carry.
MAX_BATCH = 100


def fingerprints_observe(observations: Sequence[Observation], *, now: datetime) -> dict[UUID, Observed]:
    """Record inventories, one per device, in the caller's transaction, in a constant number of
    statements whatever the batch holds. Seen again: the current snapshot's `last_seen_at`
    follows (and, for an execution report, `last_execution` and `reports`). New (or the first):
    under the devices' locks (as issuance takes them, so the two decide one after the other) the
    current snapshot is replaced, and a certificate binding other hardware is superseded
    (`hardware_changed`) and its device lifted through the lifecycle.

    One report seen again, the common case of `PUT executions/{id}`, costs one statement and
    takes no lock."""
    if not observations:
        return {}
    if len(observations) == 1:
        (only,) = observations
        current = FingerprintSnapshot.objects.filter(
            device_id=only.device_id, replaced_at__isnull=True, sha256=only.sha256
        )
        if _seen_again(current, observations, now):
            return {only.device_id: Observed(only.sha256, created=False)}
    by_device = {o.device_id: o for o in observations}
    ids = sorted(by_device)
    lock_keys_in_pk_order(Device.objects.filter(id__in=ids))
    currents = {
        snapshot.device_id: snapshot
        for snapshot in FingerprintSnapshot.objects.filter(device_id__in=ids, replaced_at__isnull=True).only(
            "id", "device_id", "sha256", "inventory"
        )
    }
    # (a single report's "same" here: a concurrent report recorded it first)
    same = [d for d in ids if d in currents and currents[d].sha256 == by_device[d].sha256]
    moved = [d for d in ids if d not in same]
    if same:
        _seen_again(
            FingerprintSnapshot.objects.filter(id__in=[currents[d].id for d in same]), [by_device[d] for d in same], now
        )
    observed = {d: Observed(by_device[d].sha256, created=False) for d in same}
    if not moved:
        return observed
    replaced = [currents[d].id for d in moved if d in currents]
    if replaced:
        FingerprintSnapshot.objects.filter(id__in=replaced).update(replaced_at=now)
    stored = {d: json.loads(by_device[d].canonical) for d in moved}
    FingerprintSnapshot.objects.bulk_create(
        FingerprintSnapshot(
            device_id=d,
            sha256=by_device[d].sha256,
            canonical=by_device[d].canonical.decode(),
            inventory=stored[d],
            first_seen_at=now,
            first_execution_id=by_device[d].execution_id,
            last_seen_at=now,
            last_execution_id=by_device[d].execution_id,
        )
        for d in moved
    )
    certificates = {
        c.device_id: c
        for c in AcceptanceCertificate.objects.filter(device_id__in=moved, superseded_at__isnull=True).only(
            "serial", "device_id", "document"
        )
    }
    superseded: list[Supersession] = []
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
            superseded.append(
                Supersession(
                    d,
                    certificate.serial,
                    SupersedeReason.HARDWARE_CHANGED,
                    rules.summary(found),
                    {"fingerprint": by_device[d].sha256},
                )
            )
            observed[d] = Observed(
                by_device[d].sha256, created=True, superseded=certificate.serial, changes=tuple(found)
            )
        else:
            observed[d] = Observed(by_device[d].sha256, created=True)
    certificates_supersede(superseded, now=now)
    return observed


def _seen_again(snapshots: QuerySet[FingerprintSnapshot], observations: Sequence[Observation], now: datetime) -> int:
    """Count these current snapshots seen again (one statement): `last_seen_at` (what repair checks
    read) for all; `last_execution` and `reports` count execution reports, so only theirs move."""
    reported = [o for o in observations if o.execution_id is not None]
    if not reported:
        return snapshots.update(last_seen_at=now)
    return snapshots.update(
        last_seen_at=now,
        last_execution_id=Case(
            *(When(device_id=o.device_id, then=Value(o.execution_id)) for o in reported),
            default=F("last_execution_id"),
            output_field=UUIDField(),
        ),
        reports=F("reports") + Case(*(When(device_id=o.device_id, then=Value(1)) for o in reported), default=Value(0)),
    )


@dataclass(frozen=True)
class SweptDevice:
    hostname: str
    device_id: UUID
    sha256: str
    created: bool
    superseded: UUID | None


@transaction.atomic
def satellite_fingerprints_report(
    *, satellite: Satellite, devices: Sequence[Mapping[str, Any]], now: datetime, actor: Actor
) -> list[SweptDevice]:
    """A satellite's inventory sweep: `devices` (validated `{hostname, inventory}`, hostnames
    distinct) must all be devices of its site (else a 400 naming each unknown one) that the caller
    serves (else a 403, `ensure_reaches`); nothing is written unless all are."""
    hostnames = [str(item["hostname"]) for item in devices]
    known = dict(Device.objects.filter(site_id=satellite.site_id, hostname__in=hostnames).values_list("hostname", "id"))
    strangers = {
        f"devices.{i}.hostname": [f"No device {hostname!r} at site {satellite.site.slug}."]
        for i, hostname in enumerate(hostnames)
        if hostname not in known
    }
    if strangers:
        raise ValidationError(strangers)
    ensure_reaches(actor, device_ids=known.values())
    observed = fingerprints_observe(
        [Observation.of(known[str(item["hostname"])], item["inventory"]) for item in devices], now=now
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
    if not restrict(Device.objects.filter(id=device_id), actor).exists():
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
