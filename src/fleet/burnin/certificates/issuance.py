"""Issue and supersede certificates for the devices a reconcile page touched: load their facts,
evidence, thresholds and newest certificate (one query), decide per device in
`fleet_rules.certificates`, sign, and write in bulk (one update; one insert that also makes the
lifecycle moves of those devices, `fleet.lifecycle`), the touched devices locked first. Every page
that wrote sends the same four statements, whatever it wrote."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any
from uuid import UUID

from django.db import connection
from django.utils import timezone

from fleet.burnin import metrics
from fleet.burnin.certificates.signing import signing_key
from fleet.burnin.certificates.statements import FACTS, ISSUE, LOCK, FactsRow, move_columns
from fleet.burnin.supersession import Supersession, lifts, supersede_run
from fleet.core.rows import bulk_read_cursor, id_text, recordset, text_or_none
from fleet.lifecycle.services import (
    Outcome,
    transitions_outcome,
)
from fleet_rules import certificates as rules
from fleet_rules.resolution import Resolution, Rule, resolve
from fleet_rules.vocabulary import RequirementScope, SupersedeReason


@dataclass(frozen=True)
class Newest:
    """A device's newest certificate: its chain link, and the current one when not superseded."""

    sha256: str
    serial: UUID
    current: rules.CurrentCertificate | None


@dataclass
class DeviceLoad:
    facts: rules.DeviceFacts
    newest: Newest | None
    evidence: list[rules.RequirementEvidence] = field(default_factory=list)


@dataclass(frozen=True)
class IssuanceCounts:
    issued: int
    superseded: int


def _json(value: Any) -> Any:
    """jsonb from a raw cursor arrives as text (Django leaves decoding to its fields)."""
    return json.loads(value) if isinstance(value, str) else value


def _newest(facts: FactsRow) -> Newest | None:
    serial, digest = facts.certificate_serial, facts.certificate_sha256
    if serial is None or digest is None:
        return None
    current = None
    if facts.certificate_superseded_at is None and facts.certificate_policy_version is not None:
        names = _json(facts.certificate_executions) or {}
        current = rules.CurrentCertificate(
            serial,
            digest,
            facts.certificate_policy_version,
            facts.certificate_valid_until,
            {k: UUID(v) for k, v in names.items()},
        )
    return Newest(digest, serial, current)


def _load(params: dict[str, str]) -> dict[UUID, DeviceLoad]:
    """One query: the touched devices (`params`: their ids as `id_text`), every requirement of
    their policies with the projection row, execution, evaluation and threshold rules that judge
    it, and their newest certificate."""
    with bulk_read_cursor() as cursor:
        rows = FACTS.rows(cursor, params)
    loads: dict[UUID, DeviceLoad] = {}
    resolutions: dict[tuple[UUID, UUID], Resolution] = {}
    for row in rows:
        load = loads.get(row.device_id)
        if load is None:
            facts = rules.DeviceFacts(
                id=row.device_id,
                hostname=row.hostname,
                serial=row.device_serial,
                resource_class=row.resource_class,
                site_id=row.site_id,
                site_slug=row.site_slug,
                policy_version=row.policy_version,
                enrolled_at=row.enrolled_at,
                fingerprint_sha256=row.fingerprint_sha256,
                fingerprint=_json(row.fingerprint_inventory),
            )
            load = loads[row.device_id] = DeviceLoad(facts, _newest(row))
        if row.requirement_id is None:
            continue
        cache_key = (row.requirement_id, row.site_id)
        if cache_key not in resolutions:  # the same rules for every device of a requirement and site
            resolutions[cache_key] = resolve(
                [
                    Rule(m, st, cmp, th, UUID(str(rs)) if rs else None)
                    for m, st, cmp, th, rs in _json(row.thresholds) or []
                ],
                row.site_id,
            )
        resolution = resolutions[cache_key]
        load.evidence.append(
            rules.RequirementEvidence(
                requirement_id=row.requirement_id,
                name=row.requirement_name,
                gate=row.gate,
                scope=row.scope,
                target_kind="device" if row.scope == RequirementScope.SINGLE_NODE else "topology",
                target_id=row.target_id,
                target_label=row.target_label,
                verdict=row.verdict,
                row_policy_version=row.row_policy_version,
                # A row judged under another resolution than the current one does not count.
                row_source_key=row.row_source_key if row.row_source_key == resolution.key else None,
                execution_id=row.execution_id,
                test=row.test,
                parameters=_json(row.parameters) or {},
                started_at=row.started_at,
                finished_at=row.finished_at,
                metrics=_json(row.metrics) or {},
                evaluation_passed=row.evaluation_passed,
                evaluation_reason=row.evaluation_reason,
                metric_evaluations=_json(row.metric_evaluations),
                evaluation_source_key=row.evaluation_source_key,
                thresholds=resolution.rules,
                evidence_valid_until=row.evidence_valid_until,
                fingerprint_sha256=row.execution_fingerprint,
            )
        )
    return loads


def certificates_refresh(
    *, device_ids: Iterable[UUID], topology_ids: Iterable[UUID], now: datetime | None = None
) -> IssuanceCounts:
    """Supersede and issue the certificates of the given devices and of every device in the given
    topologies, as their projection rows now say. Runs in the caller's transaction and sends the
    same four statements whatever it finds (the fourth also moves the devices whose certificate was
    issued or stopped holding: `fleet.lifecycle`), and none when nothing was touched (a steady
    sweep's pages)."""
    devices, topologies = list(set(device_ids)), list(set(topology_ids))
    if not devices and not topologies:
        return IssuanceCounts(0, 0)
    touched = {"devices": id_text(devices), "topologies": id_text(topologies)}  # written once, sent twice
    with connection.cursor() as cursor:
        LOCK.one(cursor, touched)
    # After the lock: a concurrent refresh of these devices has committed, and this one's clock
    # and reads come after it.
    now = now or timezone.now()
    loads = _load(touched)
    supersede: list[Supersession] = []
    issue: list[tuple[DeviceLoad, Newest | None]] = []
    for load in loads.values():
        held = load.newest.current if load.newest else None
        decision = rules.decide(held, load.facts, load.evidence, now=now)
        if decision.supersede is not None and held is not None:
            supersede.append(Supersession(load.facts.id, held.serial, SupersedeReason(decision.supersede)))
        if decision.issue:
            issue.append((load, load.newest))
    lifted = [m.requested() for m in lifts(supersede)]
    with connection.cursor() as cursor:
        supersede_run(
            cursor, supersede, now, issuing_in={(load.facts.site_id, load.facts.resource_class) for load, _ in issue}
        )
        rows = ISSUE.rows(cursor, _issue_columns(issue, now) | move_columns(lifted, now))
    inserted = [row for row in rows if row.serial is not None]
    transitions_outcome(
        lifted,
        (
            Outcome(row.device_id, row.hostname, row.state, row.to_state, row.cause, row.change_id)
            for row in rows
            if row.serial is None and row.to_state is not None and row.cause is not None
        ),
    )
    firsts = {row.device_id for row in inserted if row.first}
    metrics.first_certificates_observed(
        (load.facts.site_slug, load.facts.resource_class, (now - load.facts.enrolled_at).total_seconds())
        for load, _ in issue
        if load.facts.id in firsts and load.facts.enrolled_at is not None
    )
    return IssuanceCounts(len(inserted), len(supersede))


def _issue_columns(issue: list[tuple[DeviceLoad, Newest | None]], now: datetime) -> dict[str, Any]:
    """The statement's parameters, the certificates as one `recordset` (client-quoting arrays of
    documents of a few kB each cost more than signing them, profiled)."""
    # Nothing to sign: no key id, so the key is not recorded, and no certificate is inserted.
    columns: dict[str, Any] = {"key_id": "", "public_key": b"", "now": now}
    key = signing_key() if issue else None  # the key file is read (or created) only to sign
    if key is not None:
        columns |= {"key_id": key.key_id, "public_key": key.public_raw}
    certificates = []
    for load, newest in issue:
        assert key is not None
        serial = uuid.uuid4()
        document = rules.document(
            serial=serial,
            device=load.facts,
            evidence=load.evidence,
            issued_at=now,
            previous_sha256=newest.sha256 if newest else None,
        )
        canonical = rules.canonical(document)
        until = rules.valid_until(load.evidence)
        certificates.append(
            {
                "serial": str(serial),
                "device": str(load.facts.id),
                "site": str(load.facts.site_id),
                "rc": load.facts.resource_class,
                "version": load.facts.policy_version,
                "canonical": canonical.decode(),
                "sha256": rules.sha256(canonical),
                "signature": key.sign(canonical),
                "previous": text_or_none(newest.serial if newest else None),
                "until": until.isoformat() if until is not None else None,
            }
        )
    columns["certificates"] = recordset(certificates)
    return columns
