"""The evidence pack a vendor receives for a failed device: what its manifest says, how its files
are named, and what makes a pack whole.

The pack is a zip: `manifest.json` (this module's `manifest`, written as its RFC 8785 bytes),
`executions/<uuid>.json` (each execution as the API serialises it) and `manifest.sig` (an Ed25519
signature over the manifest's canonical bytes, with the signing key's id). The manifest lists every
other file with its SHA-256, so the signature covers them all. Text that came from a machine under
test (hostnames, error text, metric names, parameters) is only ever a JSON value here: file names
are built from UUIDs alone.

Pure functions over small dataclasses: the service loads the facts, serialises and signs.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from uuid import UUID

from fleet_rules.canonical import canonical_json
from fleet_rules.certificates import timestamp
from fleet_rules.evidence import measured
from fleet_rules.fingerprint import Change
from fleet_rules.health_evidence import health_read
from fleet_rules.vocabulary import ExecutionStatus, GpuVendor, Verdict

#: The `format` member of every manifest; a verifier refuses any other.
FORMAT = "fleet-burnin/evidence-pack/v1"
MANIFEST = "manifest.json"
SIGNATURE = "manifest.sig"
EXECUTIONS_DIR = "executions/"
ALGORITHM = "Ed25519"
#: What a verifier inflates at most, counted as the bytes come out (never from the archive's headers):
#: one member (an execution file holds one report, and a report's body is at most 10 MiB,
#: `FLEET_MAX_BODY_BYTES`; its JSON as the API serialises it stays under twice that) and the whole
#: pack (the manifest, the signature and `Limits`' executions: a real pack is a few MiB). A zip
#: bomb stops at these, read in `READ_CHUNK_BYTES` pieces.
MAX_MEMBER_BYTES = 32 * 1024 * 1024
MAX_PACK_BYTES = 256 * 1024 * 1024
READ_CHUNK_BYTES = 1024 * 1024
#: Integers an RFC 8785 document holds exactly (IEEE doubles); larger ones are written as strings.
_SAFE_INTEGER = 2**53 - 1
_UNSAFE_NAME = re.compile(r"[^A-Za-z0-9._-]+")


@dataclass(frozen=True)
class Limits:
    """What a pack holds at most, so that one stays bounded in memory whatever the device's past."""

    executions_per_target: int = 20
    history: int = 500
    repairs: int = 100
    health_reports: int = 20
    fingerprints: int = 20


@dataclass(frozen=True)
class PackDevice:
    id: UUID
    hostname: str
    serial: str
    resource_class: str
    site_id: UUID
    site_slug: str
    state: str
    enrolled_at: datetime | None


@dataclass(frozen=True)
class PackPolicy:
    resource_class: str
    version: int
    #: Attempts count from here (the policy's last version change); None: since always.
    version_changed_at: datetime | None
    #: Who made the class's GPUs: whose tools measured the evidence, and whom the pack goes to.
    gpu_vendor: str = GpuVendor.NVIDIA


@dataclass(frozen=True)
class StateChange:
    from_state: str
    to_state: str
    at: datetime
    actor: str
    cause: str
    held: bool
    reason: str
    refs: Mapping[str, Any]


@dataclass(frozen=True)
class RepairRecord:
    id: UUID
    summary: str
    parts: Sequence[Any]
    actor: str
    created_at: datetime
    rerun_mode: str
    job_ids: Sequence[Any]


@dataclass(frozen=True)
class FingerprintRecord:
    """One hardware fingerprint of the device (`fleet_rules.fingerprint`), with what changed since
    the one before it."""

    sha256: str
    inventory: Mapping[str, Any]
    first_seen_at: datetime
    last_seen_at: datetime
    current: bool
    changes: Sequence[Change] = ()


@dataclass(frozen=True)
class ExecutionFacts:
    id: UUID
    status: str
    test: str
    parameters: Mapping[str, Any]
    metrics: Mapping[str, Any]
    error: str
    started_at: datetime | None
    finished_at: datetime | None
    created_at: datetime
    updated_at: datetime
    job_id: UUID | None
    #: The evaluation for the execution's current `updated_at` (None for both: none yet).
    evaluation_passed: bool | None
    evaluation_reason: str | None
    metric_evaluations: Mapping[str, Any] | None


@dataclass(frozen=True)
class AsOf:
    """A pack of the facts before a moment: a repair's, the evidence that sent the device to repair."""

    at: datetime
    repair_id: UUID


@dataclass(frozen=True)
class FailingTarget:
    """A failed or errored projection row of the device (its own, or one of its topologies')."""

    requirement: str
    gate: str
    scope: str
    test: str
    target_kind: str  # "device" or "topology"
    target_id: UUID
    target_label: str
    verdict: str
    policy_version: int
    reconciled_at: datetime
    deciding_execution_id: UUID | None
    source_key: str | None
    #: The resolved rules (`fleet_rules.resolution`): metric, statistic, comparator, threshold.
    thresholds: Sequence[Mapping[str, Any]]
    #: Attempts under the current policy version, all of them; `executions` holds the newest few.
    attempts: int
    executions: Sequence[ExecutionFacts]  # newest first


@dataclass(frozen=True)
class HealthReport:
    """An execution of the device that carried health evidence of its burn-in window (the stored
    `health` object: Xid/SXid events, ECC counters before and after, throttle reasons seen)."""

    execution_id: UUID
    requirement: str
    reported_at: datetime
    health: Mapping[str, Any]


@dataclass(frozen=True)
class RemedyRecord:
    """A step of the remediation ladder the device was asked to take (docs/remediation.md): when, why, how it
    ended and the job that took it."""

    step: str
    asked_at: datetime
    outcome: str
    reason: str
    result: str
    finished_at: datetime | None
    job_id: UUID | None

    def as_json(self) -> dict[str, Any]:
        return {
            "step": self.step,
            "asked_at": timestamp(self.asked_at),
            "outcome": self.outcome,
            "reason": self.reason,
            "result": self.result,
            "finished_at": timestamp(self.finished_at) if self.finished_at else None,
            "job_id": str(self.job_id) if self.job_id else None,
        }


def _health_time(value: Any) -> str | None:
    if not value:
        return None
    return timestamp(datetime.fromisoformat(str(value).replace("Z", "+00:00")))


def _health(report: HealthReport) -> dict[str, Any]:
    read = health_read(report.health)
    assert read is not None
    window = report.health.get("window") or {}
    return {
        "execution_id": str(report.execution_id),
        "file": execution_path(report.execution_id),
        "requirement": report.requirement,
        "reported_at": timestamp(report.reported_at),
        "window": {"since": _health_time(window.get("since")), "until": _health_time(window.get("until"))},
        "source": read.source,
        "xid_events": len(read.events),
        "fatal_events": [
            {
                "kind": e.kind.value,
                "code": e.code,
                "meaning": e.meaning,
                "pci_bus_id": e.pci_bus_id,
                "at": timestamp(e.at),
                "message": e.message,
            }
            for e in read.fatal
        ],
        "ecc": [{"counter": c.metric, "before": c.before, "after": c.after, "delta": c.delta} for c in read.ecc],
        # the InfiniBand ports worth a reader's eye: counters that grew, could not be compared, or a link left down
        "fabric": [
            {
                "port": p.port,
                "state_before": p.state_before,
                "state_after": p.state_after,
                "grew": [{"counter": c.metric, "before": c.before, "after": c.after, "delta": c.delta} for c in p.grew],
                "saturated": p.saturated,
                "reset": p.reset,
            }
            for p in read.fabric
            if p.grew or p.saturated or p.reset or p.went_down
        ],
        "throttle_reasons_seen": list(report.health.get("throttle_reasons_seen") or []),
    }


def execution_path(execution_id: UUID) -> str:
    """The pack's file of one execution: named by its UUID only, never by anything it reported."""
    return f"{EXECUTIONS_DIR}{UUID(str(execution_id))}.json"


def pack_file_name(hostname: str, serial: str) -> str:
    """A default file name for a device's pack: hostname and serial with anything but letters,
    digits, `.`, `_` and `-` replaced, never starting with a dot, never empty."""
    stem = _UNSAFE_NAME.sub("_", f"{hostname}-{serial}").strip("._-")[:150] or "device"
    return f"{stem}.evidence.zip"


def jcs_safe(value: Any) -> Any:
    """`value` with what RFC 8785 cannot hold written as strings: integers beyond ±2**53 (a
    parameter may be one) and non-finite numbers."""
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return value
    if isinstance(value, int):
        return value if -_SAFE_INTEGER <= value <= _SAFE_INTEGER else str(value)
    if isinstance(value, float):
        return value if value == value and abs(value) != float("inf") else str(value)
    if isinstance(value, Mapping):
        return {str(k): jcs_safe(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [jcs_safe(v) for v in value]
    return str(value)


def _reading(metrics: Mapping[str, Any], metric: str) -> Mapping[str, Any]:
    reading = metrics.get(metric)
    return reading if isinstance(reading, Mapping) else {}


def rule_passed(metric_evaluations: Mapping[str, Any] | None, metric: str, statistic: str | None) -> bool | None:
    """Whether the evaluation found one rule met (None: not evaluated, or the rule not in it)."""
    if not isinstance(metric_evaluations, Mapping):
        return None
    evaluation = metric_evaluations.get(metric)
    if not isinstance(evaluation, Mapping):
        return None
    if statistic is None:
        found = evaluation.get("value_evaluation")
    else:
        statistics = evaluation.get("statistic_evaluations")
        found = statistics.get(statistic) if isinstance(statistics, Mapping) else None
    passed = found.get("passed") if isinstance(found, Mapping) else None
    return passed if isinstance(passed, bool) else None


def _unit(metrics: Mapping[str, Any], metric: str) -> str | None:
    unit = _reading(metrics, metric).get("unit")
    return unit if isinstance(unit, str) and unit else None


def _measured(execution: ExecutionFacts, thresholds: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Each rule's measured value, and whether the execution's current evaluation found it met."""
    evaluations = execution.metric_evaluations if execution.evaluation_passed is not None else None
    found = []
    for rule in thresholds:
        metric, statistic = str(rule["metric"]), rule.get("statistic")
        found.append(
            {
                "metric": metric,
                "statistic": statistic,
                "value": measured(execution.metrics, metric, statistic),
                "unit": _unit(execution.metrics, metric),
                "passed": rule_passed(evaluations, metric, statistic),
            }
        )
    return found


def _verdict(execution: ExecutionFacts) -> str | None:
    if execution.status == ExecutionStatus.ERRORED:
        return Verdict.ERRORED.value
    if execution.evaluation_passed is None:
        return None
    return (Verdict.PASSED if execution.evaluation_passed else Verdict.FAILED).value


def _execution(execution: ExecutionFacts, thresholds: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    return {
        "id": str(execution.id),
        "file": execution_path(execution.id),
        "status": execution.status,
        "verdict": _verdict(execution),
        "test": execution.test,
        "job_id": str(execution.job_id) if execution.job_id else None,
        "parameters": dict(execution.parameters),
        "created_at": timestamp(execution.created_at),
        "started_at": timestamp(execution.started_at),
        "finished_at": timestamp(execution.finished_at),
        "updated_at": timestamp(execution.updated_at),
        "evaluation": None
        if execution.evaluation_passed is None
        else {"passed": execution.evaluation_passed, "reason": execution.evaluation_reason},
        "measured": _measured(execution, thresholds),
        "error": execution.error or None,
    }


def _target(target: FailingTarget) -> dict[str, Any]:
    deciding = next((e for e in target.executions if e.id == target.deciding_execution_id), None)
    units = deciding.metrics if deciding is not None else (target.executions[0].metrics if target.executions else {})
    return {
        "requirement": {"name": target.requirement, "gate": target.gate, "scope": target.scope, "test": target.test},
        "target": {"kind": target.target_kind, "id": str(target.target_id), "label": target.target_label},
        "verdict": target.verdict,
        "policy_version": target.policy_version,
        "reconciled_at": timestamp(target.reconciled_at),
        "deciding_execution_id": str(target.deciding_execution_id) if target.deciding_execution_id else None,
        "evaluation_source_key": target.source_key,
        "thresholds": [
            {
                "metric": rule["metric"],
                "statistic": rule.get("statistic"),
                "comparator": rule["comparator"],
                "threshold": rule["threshold"],
                "unit": _unit(units, str(rule["metric"])),
            }
            for rule in target.thresholds
        ],
        "measured": _measured(deciding, target.thresholds) if deciding is not None else [],
        "attempts": {
            "under_policy_version": target.policy_version,
            "count": target.attempts,
            "included": len(target.executions),
            "executions": [_execution(e, target.thresholds) for e in target.executions],
        },
    }


def manifest(
    *,
    device: PackDevice,
    policy: PackPolicy | None,
    history: Sequence[StateChange],
    history_total: int,
    repairs: Sequence[RepairRecord],
    repairs_total: int,
    targets: Sequence[FailingTarget],
    files: Mapping[str, bytes],
    generated_at: datetime,
    generated_by: str,
    limits: Limits,
    health: Sequence[HealthReport] = (),
    health_total: int = 0,
    fingerprints: Sequence[FingerprintRecord] = (),
    fingerprints_total: int = 0,
    as_of: AsOf | None = None,
    remedies: Sequence[RemedyRecord] = (),
) -> dict[str, Any]:
    """The manifest as the JSON value that is canonicalised and signed. `files` are the pack's
    other files (path → bytes), listed with their SHA-256; `history` and `repairs` newest first.
    A pack `as_of` a repair says so: its facts are those the repair was recorded on."""
    document: dict[str, Any] = {
        "format": FORMAT,
        "generated_at": timestamp(generated_at),
        "generated_by": generated_by,
        "device": {
            "id": str(device.id),
            "hostname": device.hostname,
            "serial": device.serial,
            "resource_class": device.resource_class,
            "site": {"id": str(device.site_id), "slug": device.site_slug},
            "state": device.state,
            "enrolled_at": timestamp(device.enrolled_at),
        },
        "policy": None
        if policy is None
        else {
            "resource_class": policy.resource_class,
            "version": policy.version,
            "attempts_counted_since": timestamp(policy.version_changed_at),
            "gpu_vendor": policy.gpu_vendor,
        },
        "state_history": {
            "count": history_total,
            "changes": [
                {
                    "from_state": c.from_state,
                    "to_state": c.to_state,
                    "at": timestamp(c.at),
                    "actor": c.actor,
                    "cause": c.cause,
                    "held": c.held,
                    "reason": c.reason,
                    "refs": dict(c.refs),
                }
                for c in history
            ],
        },
        "repairs": {
            "count": repairs_total,
            "records": [
                {
                    "id": str(r.id),
                    "summary": r.summary,
                    "parts": list(r.parts),
                    "actor": r.actor,
                    "created_at": timestamp(r.created_at),
                    "rerun": r.rerun_mode,
                    "job_ids": [str(j) for j in r.job_ids],
                }
                for r in repairs
            ],
        },
        "fingerprints": {
            "count": fingerprints_total,
            "snapshots": [
                {
                    "sha256": f.sha256,
                    "current": f.current,
                    "first_seen_at": timestamp(f.first_seen_at),
                    "last_seen_at": timestamp(f.last_seen_at),
                    "inventory": dict(f.inventory),
                    "changes": [{"part": c.part, "text": c.text, "supersedes": c.supersedes} for c in f.changes],
                }
                for f in fingerprints
            ],
        },
        "targets": [_target(t) for t in sorted(targets, key=lambda t: (t.requirement, str(t.target_id)))],
        "health": {"count": health_total, "reports": [_health(h) for h in health]},
        "remediation": {"steps": [r.as_json() for r in remedies]},  # the ladder taken, oldest first
        "limits": {
            "executions_per_target": limits.executions_per_target,
            "history": limits.history,
            "repairs": limits.repairs,
            "health_reports": limits.health_reports,
            "fingerprints": limits.fingerprints,
        },
        "files": [
            {"path": path, "sha256": hashlib.sha256(data).hexdigest(), "bytes": len(data)}
            for path, data in sorted(files.items())
        ],
    }
    if as_of is not None:
        document["as_of"] = {
            "at": timestamp(as_of.at),
            "repair_id": str(as_of.repair_id),
            "why": "the evidence as it stood when this repair was recorded: what sent the device to repair",
        }
    return jcs_safe(document)  # type: ignore[no-any-return]


def canonical(document: Mapping[str, Any]) -> bytes:
    """The manifest's bytes: the file `manifest.json` and what `manifest.sig` signs."""
    return canonical_json(document)


def signature_document(key_id: str, signature_b64: str) -> bytes:
    """`manifest.sig`: the signature (base64) and the id of the key that made it."""
    return canonical_json({"algorithm": ALGORITHM, "key_id": key_id, "signature": signature_b64})


def file_problems(document: Any, members: Mapping[str, bytes]) -> list[str]:
    """What is wrong with the pack's files against its (signature-checked) manifest: a listed file
    missing or with another SHA-256, a file the manifest does not list. Empty: all whole."""
    listed = document.get("files") if isinstance(document, Mapping) else None
    if not isinstance(listed, list):
        return ["the manifest lists no files"]
    problems = []
    expected: dict[str, str] = {}
    for entry in listed:
        if not isinstance(entry, Mapping) or not isinstance(entry.get("path"), str):
            return ["the manifest's file list is malformed"]
        expected[entry["path"]] = str(entry.get("sha256"))
    for path, digest in sorted(expected.items()):
        data = members.get(path)
        if data is None:
            problems.append(f"{path}: listed in the manifest, missing from the pack")
        elif hashlib.sha256(data).hexdigest() != digest:
            problems.append(f"{path}: SHA-256 differs from the manifest ({hashlib.sha256(data).hexdigest()})")
    for path in sorted(set(members) - set(expected) - {MANIFEST, SIGNATURE}):
        problems.append(f"{json.dumps(path)}: in the pack, not listed in the manifest")
    return problems
