"""The certificate issuance's statements (`fleet.burnin.certificates.issuance` sends them): the touched
devices' facts, their lock, and the one insert that issues, supersedes and makes the lifecycle moves,
each a registered statement with its typed row (`fleet.core.statements`)."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any, NamedTuple
from uuid import UUID

from django.utils import timezone

from fleet.burnin.fragments import acceptable_sql, class_completed_sql, requirement_target_sql
from fleet.burnin.models import AcceptanceCertificate, CertificateKey, FingerprintSnapshot
from fleet.burnin.tables import sql
from fleet.core.locks import locked_sql
from fleet.core.rows import id_text, ids_sql
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
    transitions_parameters,
    wanted_columns,
)
from fleet.policies.models import AcceptancePolicy, ThresholdRule
from fleet_rules.eligibility import enrolled_sql
from fleet_rules.lifecycle import allowed_sources
from fleet_rules.vocabulary import DeviceState, EventType, Mover, TransitionCause

__all__ = ["FACTS", "ISSUE", "LOCK", "FactsRow", "IssuedOrMoved", "Locked", "move_columns"]


def move_columns(lifted: list[Move], now: datetime) -> dict[str, Any]:
    """The lifecycle chain's parameters: the lifts asked from here, and the acceptance of each
    device the statement issues a certificate to (the table's sources for the service's move)."""
    accepting = allowed_sources(DeviceState.ACCEPTED, Mover.SYSTEM, TransitionCause.CERTIFICATE_ISSUED)
    return transitions_parameters(lifted, now) | {
        "accepted": DeviceState.ACCEPTED.value,
        "accepted_sources": sources_text(accepting),
        "system": SYSTEM,
    }


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
#: certificate one after the other, the second seeing what the first committed. It answers how
#: many it locked, not their ids: nothing reads them, and a first sweep's page locks ~500 devices
#: (their uuids parsed into rows cost the client ~1 ms a page).
class Locked(NamedTuple):
    locked: int


LOCK = Statement(
    "burnin.certificates.lock_touched",
    sql(
        "WITH locked AS ({locked}) SELECT count(*) AS locked FROM locked",
        locked=sql(
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
        | move_columns([], timezone.now())
    ),
)
