"""Build a device's evidence pack (docs/evidence-pack.md): load its facts in a fixed number of
queries, let `fleet_rules.evidence_pack` write the manifest, sign it with the certificates' key and
zip it in memory.

Bounded whatever the device's past: the newest `Limits.executions_per_target` attempts of each
failing target (the count of all of them is in the manifest), the newest `Limits.history` state
changes, `Limits.repairs` repairs, `Limits.fingerprints` hardware fingerprints and
`Limits.health_reports` executions with health evidence, and the remediation ladder's steps (the newest
`Limits.health_reports`). Twelve queries
(tests/burnin/test_evidence_pack.py holds the count equal for a device with 2 and with 30 executions a target).

A repair's pack (`repair_id`) is the same pack as of the moment the repair was recorded: the
targets whose latest attempt before it failed or errored (what sent the device to repair), their
attempts, and the history, repairs and health evidence up to then. A device accepted after its
repair has no failing target any more; the evidence that justified the repair stays reachable
from the repair."""

from __future__ import annotations

import copy
import io
import json
import zipfile
from dataclasses import dataclass
from datetime import datetime
from uuid import UUID

from django.db.models import Count, F, Q, Window
from django.db.models.functions import Coalesce, RowNumber
from django.utils import timezone
from rest_framework.utils.encoders import JSONEncoder  # what the API renders with

from fleet.burnin.certificates.signing import signing_key
from fleet.burnin.execution_document import TestExecutionSerializer
from fleet.burnin.fingerprints import fingerprint_history
from fleet.burnin.models import CertificateKey, PolicyProgress, RemedyStep, TestExecution
from fleet.core.exceptions import NotFoundError
from fleet.inventory.models import Device, Site, Topology
from fleet.lifecycle.models import DeviceStateChange, Repair
from fleet.policies.models import AcceptancePolicy
from fleet.policies.selectors import load_resolutions
from fleet_rules import evidence_pack as rules
from fleet_rules.vocabulary import ExecutionStatus, RequirementScope, Verdict

LIMITS = rules.Limits()
#: The verdicts a vendor is sent evidence for.
BAD_VERDICTS = (Verdict.FAILED, Verdict.ERRORED)


@dataclass(frozen=True)
class EvidencePack:
    """The zip's bytes and what to call it."""

    device_id: UUID
    file_name: str
    content: bytes
    key_id: str


def device_for_pack(*, site_slug: str, hostname: str) -> Device:
    """The device a command names by site and hostname (404 otherwise)."""
    device = Device.objects.filter(site__slug=site_slug, hostname=hostname).only("id").first()
    if device is None:
        raise NotFoundError(f"No device {hostname!r} at site {site_slug!r}.")
    return device


def _before(at: datetime | None, field: str) -> Q:
    return Q() if at is None else Q(**{f"{field}__lt": at})


def _changes(
    device: Device, limits: rules.Limits, before: datetime | None = None
) -> tuple[list[rules.StateChange], int]:
    newest = list(
        DeviceStateChange.objects.filter(_before(before, "at"), device=device)
        .annotate(total=Window(Count("id")))  # all of them, counted before the limit
        .order_by("-at", "-id")[: limits.history]
    )
    changes = [
        rules.StateChange(c.from_state, c.to_state, c.at, c.actor, c.cause, c.held, c.reason, c.refs or {})
        for c in newest
    ]
    return changes, newest[0].total if newest else 0


def _repairs(
    device: Device, limits: rules.Limits, before: datetime | None = None
) -> tuple[list[rules.RepairRecord], int]:
    newest = list(
        Repair.objects.filter(_before(before, "created_at"), device=device)
        .annotate(total=Window(Count("id")))
        .order_by("-created_at", "-id")[: limits.repairs]
    )
    repairs = [
        rules.RepairRecord(r.id, r.summary, r.parts or [], r.actor, r.created_at, r.rerun_mode, r.job_ids or [])
        for r in newest
    ]
    return repairs, newest[0].total if newest else 0


def _health(device: Device, limits: rules.Limits, before: datetime | None = None) -> tuple[list[TestExecution], int]:
    """The device's newest executions that carried health evidence of their window (one query)."""
    newest: list[TestExecution] = list(
        TestExecution.objects.filter(_before(before, "created_at"), device=device, health__isnull=False)
        .select_related("requirement")
        .annotate(total=Window(Count("id")))  # all of them, counted before the limit
        .order_by("-created_at", "-id")[: limits.health_reports]
    )
    total = int(newest[0].total) if newest else 0  # type: ignore[attr-defined]
    return newest, total


def _remedies(device: Device, limits: rules.Limits, before: datetime | None = None) -> list[rules.RemedyRecord]:
    """The remediation ladder's steps the device took, oldest first (one query; the newest few)."""
    newest = list(
        RemedyStep.objects.filter(_before(before, "created_at"), device=device).order_by("-created_at", "-id")[
            : limits.health_reports
        ]
    )
    return [
        rules.RemedyRecord(r.step, r.created_at, r.outcome, r.reason, r.result, r.finished_at, r.job_id)
        for r in reversed(newest)
    ]


def _executions(
    rows: list[PolicyProgress], since: datetime | None, limits: rules.Limits, before: datetime | None = None
) -> tuple[list[TestExecution], dict[tuple[UUID, UUID], int]]:
    """The newest attempts under the current version of each failing target, and how many there
    are in all (one query: a window numbers each target's attempts, newest first)."""
    if not rows:
        return [], {}
    wanted = Q()
    for row in rows:
        on = Q(device_id=row.target_id) if row.device_id else Q(topology_id=row.target_id)
        wanted |= Q(requirement_id=row.requirement_id) & on
    target: list[F | Coalesce] = [F("requirement_id"), Coalesce("device_id", "topology_id")]
    found = (
        TestExecution.objects.filter(wanted, _before(before, "created_at"), diagnostic=False)
        .filter(Q() if since is None else Q(created_at__gte=since))
        .select_related("requirement", "evaluation")
        .annotate(
            rank=Window(RowNumber(), partition_by=target, order_by=[F("created_at").desc(), F("id").desc()]),
            attempts=Window(Count("id"), partition_by=target),
        )
        .filter(rank__lte=limits.executions_per_target)
        .order_by("-created_at", "-id")
    )
    executions: list[TestExecution] = list(found)
    totals = {(e.requirement_id, e.target_id): int(e.attempts) for e in executions}  # type: ignore[attr-defined]
    return executions, totals


def _failing_before(rows: list[PolicyProgress], before: datetime) -> list[PolicyProgress]:
    """The device's projection rows as they stood at `before`: each target's latest counted attempt
    created before then, kept when it failed or errored (one query). The rows are copies, changed to
    say that attempt's verdict and execution; nothing is written."""
    if not rows:
        return []
    wanted = Q()
    for row in rows:
        on = Q(device_id=row.target_id) if row.device_id else Q(topology_id=row.target_id)
        wanted |= Q(requirement_id=row.requirement_id) & on
    latest = (
        TestExecution.objects.filter(wanted, created_at__lt=before, diagnostic=False)
        .select_related("evaluation")
        .order_by("requirement_id", "device_id", "topology_id", "-created_at", "-id")
        .distinct("requirement_id", "device_id", "topology_id")
    )
    decided = {(e.requirement_id, e.target_id): e for e in latest}
    failing = []
    for row in rows:
        execution = decided.get((row.requirement_id, row.target_id))
        evaluation = getattr(execution, "evaluation", None) if execution is not None else None
        if execution is None or (
            execution.status != ExecutionStatus.ERRORED and (evaluation is None or evaluation.passed)
        ):
            continue
        then = copy.copy(row)
        then.verdict = Verdict.ERRORED if execution.status == ExecutionStatus.ERRORED else Verdict.FAILED
        then.execution_id = execution.id
        then.evaluation_source_key = evaluation.evaluation_source_key if evaluation is not None else None
        then.reconciled_at = evaluation.materialised_at if evaluation is not None else execution.updated_at
        failing.append(then)
    return failing


def _facts(execution: TestExecution) -> rules.ExecutionFacts:
    evaluation = getattr(execution, "evaluation", None)
    current = evaluation is not None and evaluation.execution_updated_at == execution.updated_at
    return rules.ExecutionFacts(
        id=execution.id,
        status=execution.status,
        test=execution.test,
        parameters=execution.parameters or {},
        metrics=execution.metrics or {},
        error=execution.error,
        started_at=execution.started_at,
        finished_at=execution.finished_at,
        created_at=execution.created_at,
        updated_at=execution.updated_at,
        job_id=execution.job_id,
        evaluation_passed=evaluation.passed if current and evaluation is not None else None,
        evaluation_reason=evaluation.reason if current and evaluation is not None else None,
        metric_evaluations=evaluation.metric_evaluations if current and evaluation is not None else None,
    )


def execution_file(execution: TestExecution) -> bytes:
    """`executions/<id>.json`: the execution exactly as `GET /api/v1/burn-in/executions/{id}/`
    serialises it (sorted keys, so a pack is the same bytes for the same facts)."""
    data = TestExecutionSerializer(execution).data
    return json.dumps(data, cls=JSONEncoder, sort_keys=True, ensure_ascii=False, indent=2).encode()


def _zip(files: dict[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for path, data in files.items():
            info = zipfile.ZipInfo(path, date_time=(1980, 1, 1, 0, 0, 0))
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = 0o644 << 16
            archive.writestr(info, data)
    return buffer.getvalue()


def evidence_pack_build(
    *, device_id: UUID, generated_by: str, limits: rules.Limits = LIMITS, repair_id: UUID | None = None
) -> EvidencePack:
    """The device's signed evidence pack (404 for an unknown device), or — given one of its repairs —
    the pack as of when that repair was recorded (404 for a repair of another device). Who may ask is
    the caller's business (the API refuses satellites' clients)."""
    device = Device.objects.select_related("site").filter(id=device_id).first()
    if device is None:
        raise NotFoundError(f"No device {device_id}.")
    as_of = None
    if repair_id is not None:
        repair = Repair.objects.filter(id=repair_id, device=device).only("id", "created_at").first()
        if repair is None:
            raise NotFoundError(f"No repair {repair_id} of device {device.hostname}.")
        as_of = rules.AsOf(repair.created_at, repair.id)
    before = as_of.at if as_of is not None else None
    site: Site = device.site
    topologies = {t.id: t for t in Topology.objects.filter(memberships__device=device)}
    policy = AcceptancePolicy.objects.filter(resource_class=device.resource_class).first()
    rows: list[PolicyProgress] = []
    if policy is not None:
        mine = PolicyProgress.objects.filter(
            Q(device=device) | Q(topology_id__in=list(topologies)),
            requirement__policy=policy,
            requirement__retired_at__isnull=True,
        ).select_related("requirement")
        rows = list(mine.filter(verdict__in=BAD_VERDICTS)) if before is None else _failing_before(list(mine), before)
    resolutions = load_resolutions({(row.requirement_id, site.id) for row in rows})
    since = policy.version_changed_at if policy is not None else None
    executions, totals = _executions(rows, since, limits, before)
    history, history_total = _changes(device, limits, before)
    repairs, repairs_total = _repairs(device, limits, before)
    health, health_total = _health(device, limits, before)
    fingerprints = fingerprint_history(device.id, limit=limits.fingerprints)
    if before is not None:  # the hardware as it had been seen by then
        fingerprints.fingerprints[:] = [f for f in fingerprints.fingerprints if f.first_seen_at < before]

    by_target: dict[tuple[UUID, UUID], list[TestExecution]] = {}
    for execution in executions:
        by_target.setdefault((execution.requirement_id, execution.target_id), []).append(execution)
    targets = []
    for row in rows:
        requirement = row.requirement
        on_device = requirement.scope == RequirementScope.SINGLE_NODE
        attempts = by_target.get((row.requirement_id, row.target_id), [])
        targets.append(
            rules.FailingTarget(
                requirement=requirement.name,
                gate=requirement.gate,
                scope=requirement.scope,
                test=requirement.test,
                target_kind="device" if on_device else "topology",
                target_id=row.target_id,
                target_label=device.hostname if on_device else topologies[row.target_id].label,
                verdict=row.verdict,
                policy_version=row.policy_version,
                reconciled_at=row.reconciled_at,
                deciding_execution_id=row.execution_id,
                source_key=row.evaluation_source_key,
                thresholds=resolutions[(row.requirement_id, site.id)].rules_list,
                attempts=totals.get((row.requirement_id, row.target_id), 0),
                executions=[_facts(e) for e in attempts],
            )
        )
    files = {rules.execution_path(e.id): execution_file(e) for e in [*executions, *health]}
    document = rules.manifest(
        device=rules.PackDevice(
            device.id,
            device.hostname,
            device.serial,
            device.resource_class,
            site.id,
            site.slug,
            device.state,
            device.enrolled_at,
        ),
        policy=None
        if policy is None
        else rules.PackPolicy(policy.resource_class, policy.version, policy.version_changed_at, policy.gpu_vendor),
        history=history,
        history_total=history_total,
        repairs=repairs,
        repairs_total=repairs_total,
        targets=targets,
        files=files,
        generated_at=timezone.now(),
        generated_by=generated_by,
        limits=limits,
        health=[rules.HealthReport(e.id, e.requirement.name, e.created_at, e.health or {}) for e in health],
        health_total=health_total,
        fingerprints=[
            rules.FingerprintRecord(f.sha256, f.inventory, f.first_seen_at, f.last_seen_at, f.current, f.changes)
            for f in fingerprints.fingerprints
        ],
        fingerprints_total=fingerprints.total,
        as_of=as_of,
        remedies=_remedies(device, limits, before),
    )
    manifest = rules.canonical(document)
    key = signing_key()
    # The key is published (GET /api/v1/certificates/keys/) from the moment it signs anything.
    CertificateKey.objects.bulk_create(
        [CertificateKey(key_id=key.key_id, public_key=key.public_raw, created_at=timezone.now())],
        ignore_conflicts=True,
    )
    content = _zip(
        {rules.MANIFEST: manifest, rules.SIGNATURE: rules.signature_document(key.key_id, key.sign(manifest)), **files}
    )
    return EvidencePack(device.id, rules.pack_file_name(device.hostname, device.serial), content, key.key_id)
