"""Certificate reads: a device's current valid certificate, its history, the published keys,
and a site's valid certificates (for export)."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, NamedTuple
from uuid import UUID, uuid4

from django.db import connection
from django.db.models import Q, QuerySet
from django.utils import timezone

from fleet.burnin.certificates.signing import ALGORITHM
from fleet.burnin.fragments import requirement_target_sql
from fleet.burnin.models import AcceptanceCertificate, CertificateKey
from fleet.burnin.tables import sql
from fleet.core.exceptions import NotFoundError
from fleet.core.statements import Statement
from fleet.inventory.identity import Actor, restrict
from fleet.inventory.models import Device, Site
from fleet.policies.models import AcceptancePolicy
from fleet_rules.eligibility import enrolled_sql
from fleet_rules.vocabulary import RequirementScope, Verdict


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
    """A device by id, as the devices API finds it: another site's satellite client finds none
    (`NotFoundError`, a 404)."""
    try:
        return restrict(Device.objects.filter(id=device_id), actor).get()
    except Device.DoesNotExist:
        raise NotFoundError(f"No device {device_id}.") from None


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


# --- for the dashboard ----------------------------------------------------------------------------


@dataclass(frozen=True)
class DeviceCertificates:
    """A device's valid certificate (if any) and its history, newest first (at most `HISTORY`)."""

    valid: AcceptanceCertificate | None
    history: list[AcceptanceCertificate]


HISTORY = 50


def device_certificates_summary(device_id: UUID) -> DeviceCertificates:
    """One query."""
    now = timezone.now()
    history = list(
        AcceptanceCertificate.objects.filter(device_id=device_id).order_by("-issued_at", "-serial")[:HISTORY]
    )
    valid = next(
        (c for c in history if c.superseded_at is None and (c.valid_until is None or c.valid_until > now)), None
    )
    return DeviceCertificates(valid, history)


@dataclass(frozen=True)
class Waiting:
    """An enrolled device without a valid certificate, and what it waits on."""

    hostname: str
    enrolled_at: datetime
    waiting_seconds: float
    waiting_on: list[tuple[str, str]]  # (requirement, verdict or "not_run" when it has no row)
    racks: dict[str, UUID] = field(default_factory=dict)  # multi-node requirement waited on → its topology


@dataclass(frozen=True)
class ClassCertification:
    resource_class: str
    enrolled: int
    certified: int
    p50_seconds: float | None  # enrolment → first certificate, over the devices that have one
    p95_seconds: float | None
    slowest: list[Waiting]


SLOWEST = 5


def valid_certificates_sql(sites: str) -> str:
    """A subquery: the `device_id` of every valid certificate (`valid_now`: current, not past its
    `valid_until` at `%(now)s`) of the sites in the array expression `sites`. It reads the partial
    index of current certificates by (site, resource class): one range per site, however many
    devices the site has, instead of a probe per device."""
    return sql(
        """(
    SELECT c.device_id FROM {certificate} c
    WHERE c.site_id = ANY({sites}) AND c.superseded_at IS NULL AND (c.valid_until IS NULL OR c.valid_until > %(now)s)
)""",
        certificate=AcceptanceCertificate._meta.db_table,
        sites=sites,
    )


#: What the site's certification statements are written with.
_CERTIFIED_FRAGMENTS = {
    "certificate": AcceptanceCertificate._meta.db_table,
    "enrolled": enrolled_sql("d"),
    "valid": valid_certificates_sql("ARRAY[%(site)s]::uuid[]"),
}


class ClassRow(NamedTuple):
    resource_class: str
    enrolled: int
    certified: int
    p50_seconds: float | None
    p95_seconds: float | None


#: Per class: enrolled and certified devices (a hash aggregate over the class's devices), and the
#: time to a first certificate over the certified ones only (the percentiles sort those, not every
#: device: sorting 100,000 devices spilled to disk, 0.18 s).
CLASSES = Statement(
    "burnin.certificates.site_classes",
    sql(
        """
WITH counts AS (
    SELECT d.resource_class, count(*) AS enrolled, count(cur.device_id) AS certified
    FROM {device} d LEFT JOIN {valid} cur ON cur.device_id = d.id
    WHERE d.site_id = %(site)s AND {enrolled}
    GROUP BY d.resource_class
), times AS (
    SELECT d.resource_class,
           percentile_cont(0.5) WITHIN GROUP (ORDER BY extract(epoch FROM f.first - d.enrolled_at)) AS p50_seconds,
           percentile_cont(0.95) WITHIN GROUP (ORDER BY extract(epoch FROM f.first - d.enrolled_at)) AS p95_seconds
    FROM (
        SELECT c.device_id, min(c.issued_at) AS first FROM {certificate} c WHERE c.site_id = %(site)s
        GROUP BY c.device_id
    ) f
    JOIN {device} d ON d.id = f.device_id
    WHERE d.site_id = %(site)s AND {enrolled}
    GROUP BY d.resource_class
)
SELECT counts.resource_class, counts.enrolled, counts.certified, times.p50_seconds, times.p95_seconds
FROM counts LEFT JOIN times USING (resource_class)
ORDER BY counts.resource_class
""",
        **_CERTIFIED_FRAGMENTS,
    ),
    ClassRow,
    example=lambda: {"site": uuid4(), "now": timezone.now(), "slowest": SLOWEST},
)


class SlowRow(NamedTuple):
    id: UUID
    hostname: str
    resource_class: str
    enrolled_at: datetime


#: Per class, its enrolled devices without a valid certificate that were enrolled first: a walk of
#: the class's entries of `inventory_device_enrolled_idx` in enrolment order, each probed for a
#: valid certificate, stopping at the fifth (a sort of the site's devices took 0.1 s at 100,000).
SLOWEST_WAITING = Statement(
    "burnin.certificates.slowest_waiting",
    sql(
        """
SELECT s.id, s.hostname, s.resource_class, s.enrolled_at
FROM (SELECT DISTINCT d.resource_class FROM {device} d WHERE d.site_id = %(site)s) rc
CROSS JOIN LATERAL (
    SELECT d.id, d.hostname, d.resource_class, d.enrolled_at FROM {device} d
    WHERE d.site_id = %(site)s AND d.resource_class = rc.resource_class AND {enrolled}
      AND NOT EXISTS (SELECT 1 FROM {valid} cur WHERE cur.device_id = d.id)
    ORDER BY d.enrolled_at, d.hostname LIMIT %(slowest)s
) s
ORDER BY s.resource_class, s.enrolled_at, s.hostname
""",
        **_CERTIFIED_FRAGMENTS,
    ),
    SlowRow,
    example=lambda: {"site": uuid4(), "now": timezone.now(), "slowest": SLOWEST},
)


class WaitingOnRow(NamedTuple):
    device_id: UUID
    requirement_name: str
    verdict: str | None
    topology_id: UUID | None  # the target, for a multi-node requirement


WAITING_ON = Statement(
    "burnin.certificates.waiting_on",
    sql(
        """
SELECT d.id AS device_id, r.name AS requirement_name, p.verdict,
       CASE WHEN r.scope = {multi_node} THEN tgt.id END AS topology_id
FROM {device} d
JOIN {policy} pol ON pol.resource_class = d.resource_class
JOIN {requirement} r ON r.policy_id = pol.id AND r.retired_at IS NULL
LEFT JOIN LATERAL {target} tgt ON true
LEFT JOIN {progress} p ON p.requirement_id = r.id AND p.target_id = tgt.id AND p.policy_version = pol.version
WHERE d.id = ANY(%(devices)s::uuid[])
ORDER BY d.id, r.name
""",
        policy=AcceptancePolicy._meta.db_table,
        target=requirement_target_sql("r", "d"),
        multi_node=f"'{RequirementScope.MULTI_NODE.value}'",
    ),
    WaitingOnRow,
    example=lambda: {"devices": [uuid4()]},
)


def site_certification(site: Site) -> list[ClassCertification]:
    """Per resource class: devices certified of enrolled, time to accept (p50, p95), and the
    devices waiting longest with what they wait on. Three queries."""
    now = timezone.now()
    params: dict[str, Any] = {"site": site.id, "now": now, "slowest": SLOWEST}
    with connection.cursor() as cursor:
        classes = CLASSES.rows(cursor, params)
        slow = SLOWEST_WAITING.rows(cursor, params)
        rows = WAITING_ON.rows(cursor, {"devices": [device.id for device in slow]})
    waiting_on: dict[UUID, list[tuple[str, str]]] = {}
    racks: dict[UUID, dict[str, UUID]] = {}
    for row in rows:
        if row.verdict != Verdict.PASSED:
            waiting_on.setdefault(row.device_id, []).append((row.requirement_name, row.verdict or Verdict.NOT_RUN))
            if row.topology_id is not None:
                racks.setdefault(row.device_id, {})[row.requirement_name] = row.topology_id
    slowest: dict[str, list[Waiting]] = {}
    for device in slow:
        slowest.setdefault(device.resource_class, []).append(
            Waiting(
                device.hostname,
                device.enrolled_at,
                (now - device.enrolled_at).total_seconds(),
                waiting_on.get(device.id, []),
                racks.get(device.id, {}),
            )
        )
    return [
        ClassCertification(
            c.resource_class, c.enrolled, c.certified, c.p50_seconds, c.p95_seconds, slowest.get(c.resource_class, [])
        )
        for c in classes
    ]
