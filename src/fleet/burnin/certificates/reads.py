"""Certificate reads: a device's current valid certificate, its history, the published keys,
and a site's valid certificates (for export)."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from uuid import UUID

from django.db.models import Q, QuerySet
from django.shortcuts import get_object_or_404
from django.utils import timezone

from fleet.burnin.certificates.signing import ALGORITHM
from fleet.burnin.models import AcceptanceCertificate, CertificateKey
from fleet.core.exceptions import NotFoundError
from fleet.inventory.identity import Actor, ensure_site_allowed
from fleet.inventory.models import Device, Site


def valid_now(now: datetime | None = None) -> Q:
    """Current (not superseded) and not past its `valid_until`."""
    now = now or timezone.now()
    return Q(superseded_at__isnull=True) & (Q(valid_until__isnull=True) | Q(valid_until__gt=now))


def envelope(certificate: AcceptanceCertificate) -> dict[str, Any]:
    """What a verifier needs: the document exactly as signed, the signature and the key id."""
    return {
        "certificate": json.loads(certificate.canonical),
        "signature": certificate.signature,
        "key_id": certificate.key_id,
    }


def _device(device_id: UUID, actor: Actor) -> Device:
    device = get_object_or_404(Device, id=device_id)
    ensure_site_allowed(actor, device.site_id)
    return device


def device_certificate(*, device_id: UUID, actor: Actor) -> AcceptanceCertificate:
    """The device's valid certificate (404 when it has none)."""
    device = _device(device_id, actor)
    certificate = AcceptanceCertificate.objects.filter(valid_now(), device=device).first()
    if certificate is None:
        raise NotFoundError(f"Device {device.hostname} holds no valid acceptance certificate.")
    return certificate


@dataclass(frozen=True)
class HistoryEntry:
    envelope: dict[str, Any]
    sha256: str
    issued_at: datetime
    valid_until: datetime | None
    superseded_at: datetime | None
    supersede_reason: str | None
    valid: bool


def device_certificates(*, device_id: UUID, actor: Actor) -> list[HistoryEntry]:
    """Every certificate the device ever held, newest first, superseded ones with their reason."""
    device = _device(device_id, actor)
    now = timezone.now()
    return [
        HistoryEntry(
            envelope=envelope(c),
            sha256=c.sha256,
            issued_at=c.issued_at,
            valid_until=c.valid_until,
            superseded_at=c.superseded_at,
            supersede_reason=c.supersede_reason,
            valid=c.superseded_at is None and (c.valid_until is None or c.valid_until > now),
        )
        for c in AcceptanceCertificate.objects.filter(device=device).order_by("-issued_at", "-serial")
    ]


def certificate_keys() -> list[dict[str, str]]:
    return [
        {"key_id": k.key_id, "algorithm": ALGORITHM, "public_key": base64.b64encode(bytes(k.public_key)).decode()}
        for k in CertificateKey.objects.all()
    ]


def site_certificates(site: Site, *, batch: int = 500) -> Iterator[AcceptanceCertificate]:
    """The site's valid certificates in serial order, read in keyset pages of `batch`."""
    after: UUID | None = None
    while True:
        page: QuerySet[AcceptanceCertificate] = AcceptanceCertificate.objects.filter(valid_now(), site=site)
        if after is not None:
            page = page.filter(serial__gt=after)
        rows = list(page.order_by("serial")[:batch])
        yield from rows
        if len(rows) < batch:
            return
        after = rows[-1].serial


def device_valid_certificate(device_id: UUID) -> AcceptanceCertificate | None:
    return AcceptanceCertificate.objects.filter(valid_now(), device_id=device_id).first()
