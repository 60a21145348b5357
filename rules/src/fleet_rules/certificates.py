"""Acceptance certificates: what makes a device certifiable, what its certificate says, and why a
certificate stops being current.

A device is *certifiable* when every non-retired requirement of its resource class's policy (all
gates; a multi-node requirement through the device's topology of its unit) has a `passed`
projection row at the policy's current version whose deciding execution carries a passing
evaluation under that row's resolution key. The certificate is a JSON document (canonicalised
by RFC 8785, as the resolution key is, and signed by the service); `sha256` of its canonical
bytes chains each certificate of a device to the one before it.

Pure functions over small dataclasses: the service loads the facts, signs and writes.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any
from uuid import UUID

from fleet_rules.canonical import canonical_json
from fleet_rules.vocabulary import RequirementScope, SupersedeReason, Verdict

#: The `format` member of every certificate document; a verifier refuses any other.
FORMAT = "fleet-burnin/acceptance-certificate/v1"


def timestamp(value: datetime | None) -> str | None:
    """UTC, microseconds, `Z`: one spelling for every time in a certificate."""
    if value is None:
        return None
    return value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


@dataclass(frozen=True)
class DeviceFacts:
    id: UUID
    hostname: str
    serial: str
    resource_class: str
    site_id: UUID
    site_slug: str
    policy_version: int | None  # None: no acceptance policy for its resource class
    enrolled_at: datetime | None
    #: The device's current hardware fingerprint (`fleet_rules.fingerprint`): its hash and the
    #: inventory; None while its agent has reported none.
    fingerprint_sha256: str | None = None
    fingerprint: dict[str, Any] | None = None


@dataclass(frozen=True)
class RequirementEvidence:
    """One requirement of the device's policy and the projection row that judges it (if any)."""

    requirement_id: UUID
    name: str
    gate: str
    scope: str
    target_kind: str  # "device" or "topology"
    target_id: UUID | None  # None: the device has no topology of the requirement's unit
    target_label: str | None
    verdict: str | None  # None: no projection row
    row_policy_version: int | None = None
    row_source_key: str | None = None
    execution_id: UUID | None = None
    test: str | None = None
    parameters: dict[str, Any] = field(default_factory=dict)
    started_at: datetime | None = None
    finished_at: datetime | None = None
    metrics: dict[str, Any] = field(default_factory=dict)
    evaluation_passed: bool | None = None
    evaluation_reason: str | None = None
    metric_evaluations: Any = None
    evaluation_source_key: str | None = None
    thresholds: tuple[dict[str, Any], ...] = ()
    #: When this pass stops counting (`evidence_valid_for` after the execution finished); None: never.
    evidence_valid_until: datetime | None = None
    #: The fingerprint the device reported with the deciding execution (None: none reported).
    fingerprint_sha256: str | None = None


@dataclass(frozen=True)
class CurrentCertificate:
    """The device's certificate that is current now (not superseded)."""

    serial: UUID
    sha256: str
    policy_version: int
    valid_until: datetime | None
    executions: dict[str, UUID]  # requirement name → the deciding execution it names


def rows_all_passed(policy_version: int | None, rows: Sequence[tuple[str | None, int | None]]) -> bool:
    """*Acceptable by its rows*: the policy has at least one non-retired requirement (one item of
    `rows` each: the verdict and policy version of the projection row of its target for the device,
    None for both when there is no row or no target) and every one of them is `passed` at the
    policy's current version. The dashboard's accepted counts and the issuance pre-filter read the
    same rule in SQL (`fleet.burnin.fragments.acceptable_sql`; a test holds the two to one answer);
    a certificate needs this and its evidence besides (`is_certifiable`)."""
    if policy_version is None or not rows:
        return False
    return all(verdict == Verdict.PASSED and version == policy_version for verdict, version in rows)


def is_certifiable(device: DeviceFacts, evidence: Sequence[RequirementEvidence]) -> bool:
    if not rows_all_passed(device.policy_version, [(item.verdict, item.row_policy_version) for item in evidence]):
        return False
    return all(_evidence_holds(device, item) for item in evidence)


def _evidence_holds(device: DeviceFacts, item: RequirementEvidence) -> bool:
    """The passed row's deciding execution carries a passing evaluation under the row's key, and
    ran on the hardware the device has now (`on_current_hardware`)."""
    return (
        item.target_id is not None
        and item.execution_id is not None
        and item.evaluation_passed is True
        and item.evaluation_source_key is not None
        and item.evaluation_source_key == item.row_source_key
        and on_current_hardware(device, item)
    )


def on_current_hardware(device: DeviceFacts, item: RequirementEvidence) -> bool:
    """A single-node pass counts only if the device reported its current fingerprint with it: a
    pass from before a GPU was swapped says nothing about the new GPU. A device whose agent reports
    no fingerprint, and a multi-node requirement (its collective reports none), are judged as
    before fingerprints."""
    if device.fingerprint_sha256 is None or item.scope == RequirementScope.MULTI_NODE:
        return True
    return item.fingerprint_sha256 == device.fingerprint_sha256


def valid_until(evidence: Sequence[RequirementEvidence]) -> datetime | None:
    """The earliest expiry among the evidence (None when none expires)."""
    expiries = [item.evidence_valid_until for item in evidence if item.evidence_valid_until is not None]
    return min(expiries) if expiries else None


def supersede_reason(
    current: CurrentCertificate, device: DeviceFacts, evidence: Sequence[RequirementEvidence], *, now: datetime
) -> SupersedeReason | None:
    """Why `current` is no longer the device's certificate, or None while it still stands.

    First match wins: a failing, then an errored newer result of any of its targets; expiry of a
    pass it rests on; a new policy version once the device's rows have all been judged at it
    (rows still at the old version are awaiting re-evaluation: the certificate stands until they
    are judged, so a tightened threshold supersedes exactly what then fails); newer passing
    evidence (renewed: a successor is issued at once).
    """
    verdicts = {item.verdict for item in evidence}
    if Verdict.FAILED in verdicts:
        return SupersedeReason.FAILED
    if Verdict.ERRORED in verdicts:
        return SupersedeReason.ERRORED
    if Verdict.EXPIRED in verdicts or (current.valid_until is not None and current.valid_until <= now):
        return SupersedeReason.EXPIRED
    if device.policy_version != current.policy_version:
        judged = all(item.verdict is None or item.row_policy_version == device.policy_version for item in evidence)
        return SupersedeReason.POLICY_CHANGED if judged else None
    if is_certifiable(device, evidence) and {i.name: i.execution_id for i in evidence} != current.executions:
        return SupersedeReason.RENEWED
    return None


@dataclass(frozen=True)
class Decision:
    supersede: SupersedeReason | None
    issue: bool


#: The reasons a certificate stops holding (a renewal replaces it with a successor): an accepted
#: device goes back to burn-in for these (`fleet_rules.lifecycle`).
LIFTING_REASONS: frozenset[SupersedeReason] = frozenset(
    {
        SupersedeReason.FAILED,
        SupersedeReason.ERRORED,
        SupersedeReason.EXPIRED,
        SupersedeReason.POLICY_CHANGED,
        SupersedeReason.HARDWARE_CHANGED,
    }
)


def decide(
    current: CurrentCertificate | None,
    device: DeviceFacts,
    evidence: Sequence[RequirementEvidence],
    *,
    now: datetime,
) -> Decision:
    """Whether to supersede the device's current certificate (and why) and whether to issue one."""
    reason = supersede_reason(current, device, evidence, now=now) if current is not None else None
    stands = current is not None and reason is None
    until = valid_until(evidence)
    fresh = until is None or until > now
    return Decision(reason, not stands and fresh and is_certifiable(device, evidence))


def document(
    *,
    serial: UUID,
    device: DeviceFacts,
    evidence: Sequence[RequirementEvidence],
    issued_at: datetime,
    previous_sha256: str | None,
) -> dict[str, Any]:
    """The certificate of a certifiable device, as the JSON value that is canonicalised and signed."""
    return {
        "format": FORMAT,
        "serial": str(serial),
        "device": {
            "id": str(device.id),
            "hostname": device.hostname,
            "serial": device.serial,
            "resource_class": device.resource_class,
            "site": {"id": str(device.site_id), "slug": device.site_slug},
        },
        "policy": {"resource_class": device.resource_class, "version": device.policy_version},
        "requirements": [_requirement(item) for item in sorted(evidence, key=lambda i: i.name)],
        "issued_at": timestamp(issued_at),
        "valid_until": timestamp(valid_until(evidence)),
        "previous_certificate_sha256": previous_sha256,
        "fingerprint": fingerprint_member(device),
    }


def fingerprint_member(device: DeviceFacts) -> dict[str, Any] | None:
    """What the certificate binds of the hardware: the fingerprint's hash and its inventory (a
    verifier recomputes the hash from the inventory, `fleet_rules.fingerprint.sha256`); null when
    the device has reported none. Certificates issued before fingerprints have no such member."""
    if device.fingerprint_sha256 is None or device.fingerprint is None:
        return None
    return {"sha256": device.fingerprint_sha256, "inventory": device.fingerprint}


def _requirement(item: RequirementEvidence) -> dict[str, Any]:
    return {
        "name": item.name,
        "gate": item.gate,
        "scope": item.scope,
        "target": {"kind": item.target_kind, "id": str(item.target_id), "label": item.target_label},
        "execution": {
            "id": str(item.execution_id),
            "test": item.test,
            "parameters": item.parameters,
            "started_at": timestamp(item.started_at),
            "finished_at": timestamp(item.finished_at),
            "metrics": item.metrics,
        },
        "evaluation": {
            "passed": item.evaluation_passed,
            "reason": item.evaluation_reason,
            "metric_evaluations": item.metric_evaluations,
        },
        "evaluation_source_key": item.evaluation_source_key,
        "thresholds": [dict(rule) for rule in item.thresholds],
        "evidence_valid_until": timestamp(item.evidence_valid_until),
    }


def canonical(document: dict[str, Any]) -> bytes:
    """The bytes that are signed: RFC 8785, like the resolution key."""
    return canonical_json(document)


def sha256(canonical_bytes: bytes) -> str:
    return hashlib.sha256(canonical_bytes).hexdigest()
