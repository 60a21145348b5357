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
from typing import Any, NamedTuple
from uuid import UUID

from django.db import connection
from django.utils import timezone

from fleet.burnin import metrics
from fleet.burnin.certificates.signing import signing_key
from fleet.burnin.fragments import acceptable_sql, class_completed_sql, requirement_target_sql
from fleet.burnin.models import AcceptanceCertificate, CertificateKey, FingerprintSnapshot
from fleet.burnin.supersession import Supersession, lifts, supersede_run
from fleet.burnin.tables import sql
from fleet.core.locks import locked_sql
from fleet.core.rows import bulk_read_cursor, id_text, ids_sql, recordset, text_or_none
from fleet.core.statements import Statement, select_list
from fleet.events.outbox import class_events_sql, device_events_sql
from fleet.inventory.models import Site
from fleet.lifecycle.services import (
    SYSTEM,
    TRANSITIONS_CHAIN,
    WANTED_MOVES,
    Move,
    Outcome,
    Wanted,
    sources_text,
    transitions_outcome,
    transitions_parameters,
    wanted_columns,
)
from fleet.policies.models import AcceptancePolicy, ThresholdRule
from fleet_rules import certificates as rules
from fleet_rules.eligibility import enrolled_sql
from fleet_rules.lifecycle import allowed_sources
from fleet_rules.resolution import Resolution, Rule, resolve
from fleet_rules.vocabulary import DeviceState, EventType, Mover, RequirementScope, SupersedeReason, TransitionCause


#: Every join is a probe by a unique key (LATERAL … LIMIT 1, or fenced with OFFSET 0) driven by the
#: touched ids: on the statistics of a projection analysed while empty (a first sweep) the planner
#: scanned every stored row once per touched device (a materialised sequential scan inside the
#: certifiability check, 38 ms for a 468-device page that found nothing) and hashed every
#: execution and evaluation (O(history) a page).
#:
#: Only the devices with something to decide are loaded whole: those holding a current certificate
#: (it may have to be superseded) and those whose every requirement has a row passed at the current
#: version (they may be certifiable). The others would be left as they are: a page mid burn-in
#: reads a few narrow rows for them, not their evidence.
class FactsRow(NamedTuple):
    """A touched device with one requirement of its policy and what judges it (the requirement's
    fields null for a device whose policy has none), and the device's newest certificate."""

    device_id: UUID
    hostname: str
    device_serial: str
    resource_class: str
    site_id: UUID
    site_slug: str
    enrolled_at: datetime | None
    policy_version: int | None
    requirement_id: UUID | None
    requirement_name: str
    gate: str
    scope: str
    target_id: UUID | None
    target_label: str | None
    verdict: str | None
    row_policy_version: int | None
    row_source_key: str | None
    execution_id: UUID | None
    test: str | None
    parameters: Any
    started_at: datetime | None
    finished_at: datetime | None
    metrics: Any
    evaluation_passed: bool | None
    evaluation_reason: str | None
    metric_evaluations: Any
    evaluation_source_key: str | None
    evidence_valid_until: datetime | None
    thresholds: Any
    certificate_serial: UUID | None
    certificate_sha256: str | None
    certificate_policy_version: int | None
    certificate_valid_until: datetime | None
    certificate_superseded_at: datetime | None
    certificate_executions: Any
    fingerprint_sha256: str | None
    fingerprint_inventory: Any
    execution_fingerprint: str | None


_FACTS_COLUMNS = select_list(
    FactsRow,
    {
        "device_id": "f.id",
        "hostname": "f.hostname",
        "device_serial": "f.serial",
        "resource_class": "f.resource_class",
        "site_id": "f.site_id",
        "site_slug": "f.slug",
        "enrolled_at": "f.enrolled_at",
        "policy_version": "f.version",
        "requirement_id": "r.id",
        "requirement_name": "r.name",
        "gate": "r.gate",
        "scope": "r.scope",
        "target_id": "tgt.id",
        "target_label": "tgt.label",
        "verdict": "p.verdict",
        "row_policy_version": "p.policy_version",
        "row_source_key": "p.evaluation_source_key",
        "execution_id": "x.id",
        "test": "x.test",
        "parameters": "x.parameters",
        "started_at": "x.started_at",
        "finished_at": "x.finished_at",
        "metrics": "x.metrics",
        "evaluation_passed": "ev.passed",
        "evaluation_reason": "ev.reason",
        "metric_evaluations": "ev.metric_evaluations",
        "evaluation_source_key": "ev.evaluation_source_key",
        "evidence_valid_until": "x.finished_at + r.evidence_valid_for",
        "thresholds": sql(
            """(SELECT json_agg(json_build_array(tr.metric, tr.statistic, tr.comparator, tr.threshold, tr.site_id))
        FROM {threshold} tr WHERE tr.requirement_id = r.id AND (tr.site_id IS NULL OR tr.site_id = f.site_id))""",
            threshold=ThresholdRule._meta.db_table,
        ),
        "certificate_serial": "c.serial",
        "certificate_sha256": "c.sha256",
        "certificate_policy_version": "c.policy_version",
        "certificate_valid_until": "c.valid_until",
        "certificate_superseded_at": "c.superseded_at",
        "certificate_executions": """(SELECT jsonb_object_agg(q->>'name', q->'execution'->>'id')
        FROM jsonb_array_elements(c.document->'requirements') q)""",
        "fingerprint_sha256": "fp.sha256",
        # The inventory (a few kB) on the device's first row only: `_load` reads it there.
        "fingerprint_inventory": """CASE WHEN row_number() OVER (PARTITION BY f.id ORDER BY r.name) = 1
            THEN fp.inventory END""",
        "execution_fingerprint": "x.fingerprint_sha256",
    },
)

FACTS = Statement(
    "burnin.certificates.facts",
    sql(
        """
WITH touched AS (
    SELECT wanted.id FROM unnest({devices}) AS wanted(id)
    UNION
    SELECT m.device_id FROM unnest({topologies}) AS rack(id)
    CROSS JOIN LATERAL (SELECT m.device_id FROM {membership} m WHERE m.topology_id = rack.id OFFSET 0) m
), candidates AS (
    SELECT d.id, d.hostname, d.serial, d.resource_class, d.site_id, s.slug, d.enrolled_at, pol.id AS policy_id,
           pol.version
    FROM touched
    CROSS JOIN LATERAL (SELECT d.* FROM {device} d WHERE d.id = touched.id OFFSET 0) d
    JOIN {site} s ON s.id = d.site_id
    LEFT JOIN {policy} pol ON pol.resource_class = d.resource_class
    WHERE {enrolled}
), facts AS (
    SELECT f.* FROM candidates f
    WHERE EXISTS (SELECT 1 FROM {certificate} c WHERE c.device_id = f.id AND c.superseded_at IS NULL)
       OR {acceptable}
)
SELECT {columns}
FROM facts f
LEFT JOIN {requirement} r ON r.policy_id = f.policy_id AND r.retired_at IS NULL
LEFT JOIN LATERAL {target} tgt ON true
LEFT JOIN LATERAL (
    SELECT p.verdict, p.policy_version, p.evaluation_source_key, p.execution_id FROM {progress} p
    WHERE p.requirement_id = r.id AND p.target_id = tgt.id LIMIT 1
) p ON true
LEFT JOIN LATERAL (
    SELECT x.id, x.test, x.parameters, x.started_at, x.finished_at, x.metrics, x.fingerprint_sha256 FROM {execution} x
    WHERE x.id = p.execution_id LIMIT 1
) x ON true
LEFT JOIN LATERAL (
    SELECT ev.passed, ev.reason, ev.metric_evaluations, ev.evaluation_source_key FROM {evaluation} ev
    WHERE ev.execution_id = x.id LIMIT 1
) ev ON true
LEFT JOIN LATERAL (
    SELECT c.serial, c.sha256, c.policy_version, c.valid_until, c.superseded_at, c.document
    FROM {certificate} c WHERE c.device_id = f.id ORDER BY c.issued_at DESC, c.serial DESC LIMIT 1
) c ON true
LEFT JOIN {fingerprint} fp ON fp.device_id = f.id AND fp.replaced_at IS NULL
ORDER BY f.id, r.name
""",
        site=Site._meta.db_table,
        policy=AcceptancePolicy._meta.db_table,
        certificate=AcceptanceCertificate._meta.db_table,
        fingerprint=FingerprintSnapshot._meta.db_table,
        enrolled=enrolled_sql("d"),
        acceptable=acceptable_sql("f", "f.policy_id", "f.version"),
        target=requirement_target_sql("r", "f"),
        columns=_FACTS_COLUMNS,
        devices=ids_sql("%(devices)s"),
        topologies=ids_sql("%(topologies)s"),
    ),
    FactsRow,
    example=lambda: {"devices": id_text([uuid.uuid4()]), "topologies": id_text([uuid.uuid4()])},
)


#: The touched devices, locked as every writer of devices locks them (`fleet.core.locks`): two
#: sweeps of different scopes touching one device (its node rows and its rack's row) decide its
#: certificate one after the other, the second seeing what the first committed.
class Locked(NamedTuple):
    id: UUID


LOCK = Statement(
    "burnin.certificates.lock_touched",
    sql(
        locked_sql(
            "{device}",
            "d",
            "d.id",
            """d.id IN (
    SELECT unnest({devices})
    UNION
    SELECT m.device_id FROM {membership} m WHERE m.topology_id = ANY({topologies})
)""",
        ),
        devices=ids_sql("%(devices)s"),
        topologies=ids_sql("%(topologies)s"),
    ),
    Locked,
    example=lambda: {"devices": id_text([uuid.uuid4()]), "topologies": ""},
)


#: The signing key's public half is recorded by the statement that first uses it; a concurrent
#: sweep (another satellite's scope touching the same device) that issued first wins: the partial
#: unique index on current certificates turns ours into a no-op.
#:
#: The same statement makes the lifecycle's moves through its writer's chain
#: (`fleet.lifecycle.services.TRANSITIONS_CHAIN`): the devices whose certificate stopped holding
#: (`%(moves)s`, the supersession's lifts, decided before it) go back to burn-in, and the devices it
#: issued a certificate to are accepted — one move per device, the issue's winning — so a
#: certificate exists exactly when its device's state says so, without a statement more per page.
#: Its rows are the certificates issued (`serial` set) and the outcome of each wanted move.
class IssuedOrMoved(NamedTuple):
    device_id: UUID
    serial: UUID | None
    first: bool | None
    hostname: str | None
    state: str | None
    to_state: str | None
    cause: str | None
    change_id: UUID | None


ISSUE = Statement(
    "burnin.certificates.issue",
    sql(
        """
WITH signer AS (
    INSERT INTO {key} (key_id, public_key, created_at)
    SELECT %(key_id)s, %(public_key)s, %(now)s WHERE %(key_id)s <> ''
    ON CONFLICT DO NOTHING
), inserted AS (
    INSERT INTO {certificate} (serial, device_id, site_id, resource_class, policy_version, document, canonical,
                               sha256, signature, key_id, previous_id, issued_at, valid_until)
    SELECT u.serial, u.device, u.site, u.rc, u.version, u.canonical::jsonb, u.canonical, u.sha256, u.signature,
           %(key_id)s, u.previous, %(now)s, u.until
    FROM jsonb_to_recordset(%(certificates)s::jsonb)
         AS u(serial uuid, device uuid, site uuid, rc varchar, version int, canonical text, sha256 varchar,
              signature text, previous uuid, until timestamptz)
    ON CONFLICT DO NOTHING
    RETURNING device_id, serial, previous_id IS NULL AS first, valid_until, site_id, resource_class, previous_id
), issued_events AS (
    {issued_events}
), completed AS (
    {completed}
), completed_events AS (
    {completed_events}
), wanted AS (
    SELECT DISTINCT ON (w.device) {wanted} FROM (
        SELECT {accepting}, 0 AS rank FROM inserted i
        UNION ALL
        SELECT m.*, 1 AS rank FROM ({lifted}) m
    ) w
    ORDER BY w.device, w.rank
), {chain}
SELECT {issued} FROM inserted i
UNION ALL
SELECT {outcome} FROM outcome o
""",
        key=CertificateKey._meta.db_table,
        certificate=AcceptanceCertificate._meta.db_table,
        # Each certificate issued is an event, in this statement (a reconcile page pays no statement more).
        issued_events=device_events_sql(
            sql(
                """(SELECT i.device_id, d.hostname, d.site_id, s.slug AS site_slug, d.resource_class,
           '{event_type}' AS event_type,
           jsonb_build_object('certificate', i.serial::text, 'first', i.first, 'valid_until', i.valid_until) AS data
    FROM inserted i JOIN {device} d ON d.id = i.device_id JOIN {site} s ON s.id = d.site_id) e""",
                event_type=EventType.CERTIFICATE_ISSUED.value,
                site=Site._meta.db_table,
            )
        ),
        completed=class_completed_sql("inserted"),
        # Each class this statement completes is an event (once: see `class_completed_sql`).
        completed_events=class_events_sql(
            sql(
                """(SELECT k.site_id, k.site_slug, k.resource_class, '{event_type}' AS event_type,
           jsonb_build_object('devices', k.devices, 'certificates', k.certificates) AS data
    FROM completed k) e""",
                event_type=EventType.CLASS_ACCEPTED.value,
            )
        ),
        wanted=wanted_columns({name: f"w.{name}" for name in Wanted._fields}),
        accepting=wanted_columns(
            {
                "device": "i.device_id",
                "to_state": "%(accepted)s::varchar",
                "cause": "%(issued)s::varchar",
                "sources": "%(accepted_sources)s::text",
                "reason": "'certificate ' || i.serial || ' issued'",
                "refs": "jsonb_build_object('certificate', i.serial::text)",
                "actor": "%(system)s::varchar",
            }
        ),
        lifted=WANTED_MOVES,
        chain=TRANSITIONS_CHAIN,
        issued=select_list(
            IssuedOrMoved,
            {"device_id": "i.device_id", "serial": "i.serial", "first": "i.first"}
            | {name: "NULL" for name in Outcome._fields if name != "device_id"},
        ),
        outcome=select_list(
            IssuedOrMoved,
            {"serial": "NULL", "first": "NULL"} | {name: f"o.{name}" for name in Outcome._fields},
        ),
    ),
    IssuedOrMoved,
    example=lambda: (
        {
            "key_id": "",
            "public_key": b"",
            "now": timezone.now(),
            "certificates": "[]",
        }
        | _move_columns([], timezone.now())
    ),
)


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


def _load(device_ids: Iterable[UUID], topology_ids: Iterable[UUID]) -> dict[UUID, DeviceLoad]:
    """One query: the touched devices, every requirement of their policies with the projection
    row, execution, evaluation and threshold rules that judge it, and their newest certificate."""
    params = {"devices": id_text(device_ids), "topologies": id_text(topology_ids)}
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
    with connection.cursor() as cursor:
        LOCK.rows(cursor, {"devices": id_text(devices), "topologies": id_text(topologies)})
    # After the lock: a concurrent refresh of these devices has committed, and this one's clock
    # and reads come after it.
    now = now or timezone.now()
    loads = _load(devices, topologies)
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
        rows = ISSUE.rows(cursor, _issue_columns(issue, now) | _move_columns(lifted, now))
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


def _move_columns(lifted: list[Move], now: datetime) -> dict[str, Any]:
    """The lifecycle chain's parameters: the lifts asked from here, and the acceptance of each
    device the statement issues a certificate to (the table's sources for the service's move)."""
    accepting = allowed_sources(DeviceState.ACCEPTED, Mover.SYSTEM, TransitionCause.CERTIFICATE_ISSUED)
    return transitions_parameters(lifted, now) | {
        "accepted": DeviceState.ACCEPTED.value,
        "accepted_sources": sources_text(accepting),
        "system": SYSTEM,
    }


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
