"""The Job path: the only way any burn-in job is created (first runs and reruns alike), and the
lease protocol satellites use to run them.

Creation locks the devices in primary-key order, checks they are eligible and free, then inserts
the jobs and their active device rows; the partial unique index "one active job per device"
turns any race that slipped past the check into a clean refusal, never a second active job.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, NamedTuple
from uuid import UUID

from django.conf import settings
from django.db import IntegrityError, connection, transaction
from django.db.models import QuerySet
from django.utils import timezone

from fleet.core.exceptions import Conflict, NotFoundError
from fleet.core.locks import lock_keys_in_pk_order
from fleet.core.rows import id_text, ids_sql, recordset, text_or_none
from fleet.core.statements import NoRow, Statement
from fleet.inventory.identity import Actor, ensure_reaches
from fleet.inventory.models import Device, Satellite
from fleet.jobs.models import ONE_ACTIVE_JOB_PER_DEVICE, Job, JobDevice
from fleet_rules.eligibility import is_burn_in_eligible
from fleet_rules.jobs import EndTransition, end_transition, lease_expired
from fleet_rules.vocabulary import ACTIVE_JOB_STATUSES, JobReason, JobStatus, WorkflowName

logger = logging.getLogger("fleet.jobs")


@dataclass(frozen=True)
class JobSpec:
    site_id: UUID
    satellite_id: UUID
    workflow_name: WorkflowName
    device_ids: tuple[UUID, ...]
    parameters: dict[str, Any] = field(default_factory=dict)
    topology_id: UUID | None = None


class JobRefused(Conflict):
    """A job could not be created: a device is ineligible or already held. `holding` names the
    active jobs that hold the devices (job id → the held devices' hostnames), so that a page can
    link them and offer to act once they end."""

    def __init__(
        self, detail: str, *, holding: dict[UUID, list[str]] | None = None, held_devices: tuple[UUID, ...] = ()
    ) -> None:
        super().__init__(detail)
        self.holding = holding or {}
        self.held_devices = held_devices  # the devices asked for, of which some are held


class JobNotRunning(Conflict):
    """A heartbeat for a job that is no longer running: its agent must stop working on it."""


class _CheckedDevice(NamedTuple):
    """What `_check_devices` reads of a device, as a tuple: 7,500 model instances took 76 ms of a
    dispatch, the same rows as tuples 48 ms (measured)."""

    id: UUID
    site_id: UUID
    hostname: str
    state: str
    enrolled_at: datetime | None


def _refusal(spec: JobSpec, devices: dict[UUID, _CheckedDevice]) -> JobRefused | None:
    """Why the spec's job cannot be created from what its devices are (site, eligibility); None: it can."""
    for device_id in spec.device_ids:
        device = devices.get(device_id)
        if device is None or device.site_id != spec.site_id:
            return JobRefused(f"Device {device_id} is not at the job's site.")
        if not is_burn_in_eligible(enrolled_at=device.enrolled_at, state=device.state):
            return JobRefused(f"Device {device.hostname} is not eligible for burn-in (state {device.state}).")
    return None


def _holding(device_ids: Iterable[UUID]) -> dict[UUID, tuple[UUID, str]]:
    """The active job holding each of the devices that one holds, with the device's hostname (one statement)."""
    held = JobDevice.objects.filter(active=True, device_id__among=device_ids)
    rows = held.values_list("device_id", "job_id", "device__hostname")
    return {device_id: (job_id, hostname) for device_id, job_id, hostname in rows}


def _held_refusal(holders: Iterable[tuple[UUID, str]], asked: tuple[UUID, ...]) -> JobRefused | None:
    holding: dict[UUID, list[str]] = {}
    for job_id, hostname in holders:
        holding.setdefault(job_id, []).append(hostname)
    if not holding:
        return None
    named = "; ".join(
        f"job {job_id} holds {', '.join(sorted(h))}" for job_id, h in sorted(holding.items(), key=lambda i: str(i[0]))
    )
    return JobRefused(f"Device(s) already held by an active job: {named}.", holding=holding, held_devices=asked)


def _check_devices(specs: Sequence[JobSpec], devices: dict[UUID, _CheckedDevice]) -> None:
    for spec in specs:
        if (refused := _refusal(spec, devices)) is not None:
            raise refused
    if (held := _held_refusal(_holding(devices).values(), tuple(devices))) is not None:
        raise held


def _refusals(specs: Sequence[JobSpec], devices: dict[UUID, _CheckedDevice]) -> list[JobRefused | None]:
    """Each spec's refusal alone (`jobs_create_each`): its devices' site and eligibility, a device an active job
    holds, a device an earlier spec of the batch asked for."""
    holding = _holding(devices)
    asked: set[UUID] = set()
    refusals: list[JobRefused | None] = []
    for spec in specs:
        refused = _refusal(spec, devices) or _held_refusal(
            (holding[d] for d in spec.device_ids if d in holding), spec.device_ids
        )
        if refused is None and asked.intersection(spec.device_ids):
            refused = JobRefused("A device appears in more than one of the jobs to create.")
        if refused is None:
            asked.update(spec.device_ids)
        refusals.append(refused)
    return refusals


#: The jobs and their device leases in one statement, from one JSON document (`recordset`):
#: Django's `bulk_create` quoted every value of 7,500 jobs in Python, 3.5 s of a 10,000-device
#: dispatch (profiled). A device another active job took meanwhile fails the whole statement.
_INSERT_JOBS_TEMPLATE = """
WITH b AS (
    SELECT * FROM jsonb_to_recordset(%(jobs)s::jsonb) AS b(
        id uuid, created_at timestamptz, updated_at timestamptz, site_id uuid, satellite_id uuid, workflow_name text,
        status text, topology_id uuid, parameters jsonb, requested_by text, reason text, failure_reason text,
        devices text)
), jobs AS (
    INSERT INTO {job} (id, created_at, updated_at, site_id, satellite_id, workflow_name, status, topology_id,
                       parameters, requested_by, reason, failure_reason)
    SELECT id, created_at, updated_at, site_id, satellite_id, workflow_name, status, topology_id, parameters,
           requested_by, reason, failure_reason FROM b
)
INSERT INTO {job_device} (job_id, device_id, active)
SELECT b.id, device.id, true FROM b CROSS JOIN LATERAL unnest({devices}) AS device(id)
"""
INSERT_JOBS = Statement(
    "jobs.insert_jobs",
    _INSERT_JOBS_TEMPLATE.format(
        job=Job._meta.db_table, job_device=JobDevice._meta.db_table, devices=ids_sql("b.devices")
    ),
    NoRow,
    example=lambda: {"jobs": "[]"},
)


def _job_rows(jobs: Sequence[Job], specs: Sequence[JobSpec]) -> str:
    return recordset(
        {
            "id": str(job.id),
            "created_at": job.created_at.isoformat(),
            "updated_at": job.updated_at.isoformat(),
            "site_id": str(job.site_id),
            "satellite_id": str(job.satellite_id),
            "workflow_name": job.workflow_name,
            "status": job.status,
            "topology_id": text_or_none(job.topology_id),
            "parameters": job.parameters,
            "requested_by": job.requested_by,
            "reason": job.reason,
            "failure_reason": job.failure_reason,
            "devices": id_text(spec.device_ids),
        }
        for job, spec in zip(jobs, specs, strict=True)
    )


def jobs_create(
    *, specs: Sequence[JobSpec], requested_by: str, reason: JobReason = JobReason.DISPATCH, locked: bool = False
) -> list[Job]:
    """Create several jobs in a constant number of queries, or none (`JobRefused` names why). Callers
    that already hold the device locks (dispatch, which planned under them) pass `locked=True`."""
    if not specs:
        return []
    with transaction.atomic():
        if len({d for spec in specs for d in spec.device_ids}) != sum(len(spec.device_ids) for spec in specs):
            raise JobRefused("A device appears in more than one of the jobs to create.")
        devices = _devices_checked(specs, locked=locked)
        _check_devices(specs, devices)
        return _jobs_insert(specs, requested_by, reason)


def jobs_create_each(
    *, specs: Sequence[JobSpec], requested_by: str, reason: JobReason = JobReason.DISPATCH
) -> list[Job | JobRefused]:
    """Create each of the jobs that can be, in a constant number of queries: for each spec its job, or the
    `JobRefused` that keeps it (and it alone) from being created, in the specs' order. A device another
    transaction took between the check and the insert (impossible under the locks this takes) still refuses
    the whole batch."""
    if not specs:
        return []
    with transaction.atomic():
        devices = _devices_checked(specs, locked=False)
        refusals = _refusals(specs, devices)
        created = iter(
            _jobs_insert([s for s, r in zip(specs, refusals, strict=True) if r is None], requested_by, reason)
        )
        return [refused if refused is not None else next(created) for refused in refusals]


def _devices_checked(specs: Sequence[JobSpec], *, locked: bool) -> dict[UUID, _CheckedDevice]:
    """The specs' devices, locked in primary-key order unless the caller holds them, after the jobs holding them
    whose lease ran out have ended."""
    device_ids = {d for spec in specs for d in spec.device_ids}
    named = Device.objects.filter(id__among=device_ids)
    checked = (
        list(map(_CheckedDevice._make, named.values_list(*_CheckedDevice._fields)))
        if locked
        else lock_keys_in_pk_order(named, row=_CheckedDevice)
    )
    if not locked:
        jobs_expire_leases_holding(device_ids=device_ids, now=timezone.now())
    return {device.id: device for device in checked}


def _jobs_insert(specs: Sequence[JobSpec], requested_by: str, reason: JobReason) -> list[Job]:
    if not specs:
        return []
    now = timezone.now()
    jobs = [
        Job(
            site_id=spec.site_id,
            satellite_id=spec.satellite_id,
            workflow_name=spec.workflow_name,
            topology_id=spec.topology_id,
            parameters=spec.parameters,
            requested_by=requested_by,
            reason=reason,
            created_at=now,
            updated_at=now,
        )
        for spec in specs
    ]
    try:
        with transaction.atomic(), connection.cursor() as cursor:
            INSERT_JOBS.run(cursor, {"jobs": _job_rows(jobs, specs)})
    except IntegrityError as exc:
        if getattr(getattr(exc.__cause__, "diag", None), "constraint_name", None) != ONE_ACTIVE_JOB_PER_DEVICE:
            raise
        raise JobRefused("A device was taken by another active job at the same moment.") from exc
    for job in jobs:
        job._state.adding, job._state.db = False, connection.alias
    return jobs


def job_create(*, spec: JobSpec, requested_by: str, reason: JobReason = JobReason.DISPATCH) -> Job:
    return jobs_create(specs=[spec], requested_by=requested_by, reason=reason)[0]


# --- ending jobs ------------------------------------------------------------------------------

#: Told which jobs just ended and why, inside the transaction that ended them (burn-in closes the
#: executions those jobs left running). Registered once at start-up: `on_jobs_ended`.
JobEndListener = Callable[[Sequence[UUID], str], object]
_end_listeners: list[JobEndListener] = []


def on_jobs_ended(listener: JobEndListener) -> None:
    """Subscribe to job ends. The arrow points into this app: whoever owns what a job leaves
    behind (its executions) registers here, so this app never needs to know them."""
    if listener not in _end_listeners:
        _end_listeners.append(listener)


def jobs_end(*, job_ids: Sequence[UUID], status: JobStatus, failure_reason: str, why: str, now: datetime) -> None:
    """The one way jobs end (finish, cancel, lease expiry, dispatch clearing an expired holder):
    a forward-only status change, the devices released, the listeners told. The callers hold the
    jobs' row locks and have checked `end_transition`; the guard on the active statuses makes a
    job that already ended impossible to end twice."""
    if not job_ids:
        return
    ended = Job.objects.filter(id__in=job_ids, status__in=ACTIVE_JOB_STATUSES).update(
        status=status, finished_at=now, updated_at=now, failure_reason=failure_reason
    )
    if ended != len(set(job_ids)):
        raise Conflict("A job ended by another request at the same moment; retry.")
    JobDevice.objects.filter(job_id__in=job_ids, active=True).update(active=False)
    for listener in _end_listeners:
        listener(job_ids, why)


# --- leases ----------------------------------------------------------------------------------


def lease_duration() -> timedelta:
    return timedelta(seconds=settings.FLEET["JOB_LEASE_SECONDS"])


LEASE_EXPIRED = "lease expired"
LEASE_EXPIRED_WHY = "the job's lease expired before the execution finished"


def _fail_expired(candidates: QuerySet[Job], now: datetime) -> list[UUID]:
    """Fail the running jobs among `candidates` whose lease ran out (whoever ran them is gone).
    Rows another transaction holds (a heartbeat in progress) are skipped, never failed behind
    its back."""
    expired = list(
        candidates.select_for_update(skip_locked=True)
        .filter(status=JobStatus.RUNNING, lease_expires_at__lt=now)
        .values_list("id", flat=True)
    )
    jobs_end(job_ids=expired, status=JobStatus.FAILED, failure_reason=LEASE_EXPIRED, why=LEASE_EXPIRED_WHY, now=now)
    return expired


def jobs_expire_leases(*, satellite: Satellite, now: datetime) -> list[UUID]:
    """At a claim: the satellite's own jobs whose lease ran out."""
    expired = _fail_expired(Job.objects.filter(satellite=satellite), now)
    if expired:
        logger.warning("failed %d job(s) of %s whose lease expired", len(expired), satellite)
    return expired


def jobs_expire_leases_holding(*, device_ids: Iterable[UUID], now: datetime) -> list[UUID]:
    """Before devices are planned or held again: any job holding them whose lease ran out, whatever
    satellite it belongs to (a satellite whose agent died for good never claims again)."""
    holding = JobDevice.objects.filter(active=True, device_id__among=device_ids).values("job_id")
    expired = _fail_expired(Job.objects.filter(id__in=holding), now)
    if expired:
        logger.warning("failed %d job(s) whose lease expired while holding devices to plan", len(expired))
    return expired


@transaction.atomic
def jobs_claim(*, satellite: Satellite, capacity: int) -> list[Job]:
    """Hand out up to `capacity` of the satellite's queued jobs, oldest first, each with a lease.
    SKIP LOCKED: two agents claiming at once never get the same job."""
    now = timezone.now()
    jobs_expire_leases(satellite=satellite, now=now)
    claimed = list(
        Job.objects.select_for_update(skip_locked=True)
        .filter(satellite=satellite, status=JobStatus.QUEUED)
        .order_by("created_at", "id")[:capacity]
    )
    if claimed:
        lease = now + lease_duration()
        Job.objects.filter(id__in=[j.id for j in claimed]).update(
            status=JobStatus.RUNNING, claimed_at=now, lease_expires_at=lease, updated_at=now
        )
        for job in claimed:
            job.status, job.claimed_at, job.lease_expires_at = JobStatus.RUNNING, now, lease
    return claimed


def _locked_job(job_id: UUID, actor: Actor = None) -> Job:
    """The job, row-locked; 404 when it does not exist, 403 when it is another satellite's."""
    job = Job.objects.select_for_update().filter(id=job_id).first()
    if job is None:
        raise NotFoundError(f"No job {job_id}.")
    ensure_reaches(actor, satellite_id=job.satellite_id)
    return job


@transaction.atomic
def _heartbeat(job_id: UUID, actor: Actor) -> Job:
    job = _locked_job(job_id, actor)
    now = timezone.now()
    if job.status != JobStatus.RUNNING:
        return job
    if lease_expired(status=job.status, lease_expires_at=job.lease_expires_at, now=now):
        jobs_end(
            job_ids=[job.id], status=JobStatus.FAILED, failure_reason=LEASE_EXPIRED, why=LEASE_EXPIRED_WHY, now=now
        )
        job.refresh_from_db()
        return job
    job.lease_expires_at = now + lease_duration()
    job.save(update_fields=["lease_expires_at", "updated_at"])
    return job


def job_heartbeat(*, job_id: UUID, actor: Actor = None) -> Job:
    """Extend a running job's lease. A job that no longer runs — finished, cancelled, or failed
    because its lease had already run out (committed before answering, so its devices may be
    planned again) — is a 409: the agent must stop working on it."""
    job = _heartbeat(job_id, actor)
    if job.status != JobStatus.RUNNING:
        raise JobNotRunning(f"Job {job.id} is {job.status} ({job.failure_reason or 'no reason'}); stop working on it.")
    return job


def _end(job: Job, target: JobStatus, *, retry_is_noop: bool, failure_reason: str, why: str) -> Job:
    transition = end_transition(job.status, target, retry_is_noop=retry_is_noop)
    if transition is EndTransition.REFUSE:
        raise Conflict(f"Job {job.id} already ended as {job.status}.")
    if transition is EndTransition.END:
        jobs_end(job_ids=[job.id], status=target, failure_reason=failure_reason, why=why, now=timezone.now())
        job.refresh_from_db()
    return job


@transaction.atomic
def job_finish(*, job_id: UUID, outcome: JobStatus, reason: str = "", actor: Actor = None) -> Job:
    """An agent ends its job and releases its devices. Repeating the same outcome is a no-op (a
    lost answer retried); a different outcome for a job that already ended is a 409."""
    job = _locked_job(job_id, actor)
    why = f"the job ended ({outcome}) before the execution finished"
    return _end(job, outcome, retry_is_noop=True, failure_reason=reason, why=why)


@transaction.atomic
def job_cancel(*, job_id: UUID, requested_by: str) -> Job:
    """An operator cancels an active job; cancelling one that already ended is a 409."""
    job = _locked_job(job_id)
    return _end(
        job,
        JobStatus.CANCELLED,
        retry_is_noop=False,
        failure_reason=f"cancelled by {requested_by}",
        why=f"the job was cancelled by {requested_by}",
    )
