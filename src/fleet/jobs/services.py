"""The Job path: the only way any burn-in job is created (first runs and reruns alike), and the
lease protocol satellites use to run them.

Creation locks the devices in primary-key order, checks they are eligible and free, then inserts
the jobs and their active device rows; the partial unique index "one active job per device"
turns any race that slipped past the check into a clean refusal, never a second active job.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any
from uuid import UUID

from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils import timezone

from fleet.core.errors import Conflict
from fleet.core.locks import lock_in_pk_order
from fleet.inventory.models import BURN_IN_STATES, Device, Satellite
from fleet.jobs.models import ACTIVE_JOB_STATUSES, Job, JobDevice, JobStatus

logger = logging.getLogger("fleet.jobs")


@dataclass(frozen=True)
class JobSpec:
    site_id: UUID
    satellite_id: UUID
    workflow_name: str
    device_ids: tuple[UUID, ...]
    parameters: dict[str, Any] = field(default_factory=dict)
    topology_id: UUID | None = None


class JobRefused(Conflict):
    """A job could not be created: a device is ineligible or already held."""


def _check_devices(specs: Sequence[JobSpec], devices: dict[UUID, Device]) -> None:
    for spec in specs:
        for device_id in spec.device_ids:
            device = devices.get(device_id)
            if device is None or device.site_id != spec.site_id:
                raise JobRefused(f"Device {device_id} is not at the job's site.")
            if device.state not in BURN_IN_STATES or not device.is_enrolled:
                raise JobRefused(f"Device {device.hostname} is not eligible for burn-in (state {device.state}).")
    held = list(
        JobDevice.objects.filter(active=True, device_id__in=list(devices)).values_list("device__hostname", flat=True)
    )
    if held:
        raise JobRefused(f"Device(s) already held by an active job: {', '.join(sorted(held))}.")


def jobs_create(
    *, specs: Sequence[JobSpec], requested_by: str, reason: str = "dispatch", locked: bool = False
) -> list[Job]:
    """Create several jobs in a constant number of queries. Callers that already hold the
    device locks (dispatch, which planned under them) pass `locked=True`."""
    if not specs:
        return []
    with transaction.atomic():
        device_ids = {d for spec in specs for d in spec.device_ids}
        if len(device_ids) != sum(len(spec.device_ids) for spec in specs):
            raise JobRefused("A device appears in more than one of the jobs to create.")
        devices = (
            {d.id: d for d in Device.objects.filter(id__in=device_ids)}
            if locked
            else {d.id: d for d in lock_in_pk_order(Device, device_ids)}
        )
        if not locked:
            jobs_expire_leases_holding(device_ids=device_ids, now=timezone.now())
        _check_devices(specs, devices)
        jobs = [
            Job(
                site_id=spec.site_id,
                satellite_id=spec.satellite_id,
                workflow_name=spec.workflow_name,
                topology_id=spec.topology_id,
                parameters=spec.parameters,
                requested_by=requested_by,
                reason=reason,
            )
            for spec in specs
        ]
        Job.objects.bulk_create(jobs)
        rows = [JobDevice(job=job, device_id=d) for job, spec in zip(jobs, specs, strict=True) for d in spec.device_ids]
        try:
            with transaction.atomic():
                JobDevice.objects.bulk_create(rows)
        except IntegrityError as exc:
            raise JobRefused("A device was taken by another active job at the same moment.") from exc
    return jobs


def job_create(*, spec: JobSpec, requested_by: str, reason: str = "dispatch") -> Job:
    return jobs_create(specs=[spec], requested_by=requested_by, reason=reason)[0]


# --- leases ----------------------------------------------------------------------------------


def lease_duration() -> timedelta:
    return timedelta(seconds=settings.FLEET["JOB_LEASE_SECONDS"])


def _release(job_ids: Sequence[UUID]) -> None:
    JobDevice.objects.filter(job_id__in=job_ids, active=True).update(active=False)


def _fail_expired(candidates, now: datetime) -> list[UUID]:
    """Fail the running jobs among `candidates` whose lease ran out, release their devices and
    mark their unfinished executions errored (whoever ran them is gone). Rows another transaction
    holds (a heartbeat in progress) are skipped, never failed behind its back."""
    from fleet.burnin.executions import executions_abandon

    expired = list(
        candidates.select_for_update(skip_locked=True)
        .filter(status=JobStatus.RUNNING, lease_expires_at__lt=now)
        .values_list("id", flat=True)
    )
    if expired:
        Job.objects.filter(id__in=expired).update(
            status=JobStatus.FAILED, finished_at=now, updated_at=now, failure_reason="lease expired"
        )
        _release(expired)
        executions_abandon(job_ids=expired, error="the job's lease expired before the execution finished")
    return expired


def jobs_expire_leases(*, satellite: Satellite, now: datetime) -> list[UUID]:
    """At a claim: the satellite's own jobs whose lease ran out."""
    expired = _fail_expired(Job.objects.filter(satellite=satellite), now)
    if expired:
        logger.warning("failed %d job(s) of %s whose lease expired", len(expired), satellite)
    return expired


def jobs_expire_leases_holding(*, device_ids, now: datetime) -> list[UUID]:
    """Before devices are planned or held again: any job holding them whose lease ran out, whatever
    satellite it belongs to (a satellite whose agent died for good never claims again)."""
    holding = JobDevice.objects.filter(active=True, device_id__in=list(device_ids)).values("job_id")
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


def _locked_job(job_id: UUID) -> Job:
    job = Job.objects.select_for_update().filter(id=job_id).first()
    if job is None:
        from django.http import Http404

        raise Http404(f"No job {job_id}.")
    return job


@transaction.atomic
def job_heartbeat(*, job_id: UUID, satellite_id: UUID | None = None) -> Job:
    """Extend a running job's lease. A lease that already ran out fails the job instead (its
    devices may be planned again); the caller sees a job that is no longer running."""

    job = _locked_job(job_id)
    _ensure_owner(job, satellite_id)
    now = timezone.now()
    if job.status != JobStatus.RUNNING:
        return job
    if job.lease_expires_at and job.lease_expires_at < now:
        job.status, job.finished_at, job.failure_reason = JobStatus.FAILED, now, "lease expired"
        job.save(update_fields=["status", "finished_at", "failure_reason", "updated_at"])
        _release([job.id])
        _close_executions(job, "the job's lease expired before the execution finished")
        return job
    job.lease_expires_at = now + lease_duration()
    job.save(update_fields=["lease_expires_at", "updated_at"])
    return job


_FINISH_TO = {"succeeded": JobStatus.SUCCEEDED, "failed": JobStatus.FAILED, "cancelled": JobStatus.CANCELLED}


@transaction.atomic
def job_finish(*, job_id: UUID, outcome: str, reason: str = "", satellite_id: UUID | None = None) -> Job:
    """End a job and release its devices. Repeating the same outcome is a no-op; a different
    outcome for a job that already ended is a 409."""
    job = _locked_job(job_id)
    _ensure_owner(job, satellite_id)
    target = _FINISH_TO[outcome]
    if job.status == target:
        return job
    if job.status not in ACTIVE_JOB_STATUSES:
        raise Conflict(f"Job {job.id} already ended as {job.status}.")
    job.status, job.finished_at, job.failure_reason = target, timezone.now(), reason
    job.save(update_fields=["status", "finished_at", "failure_reason", "updated_at"])
    _release([job.id])
    _close_executions(job, f"the job ended ({target}) before the execution finished")
    return job


@transaction.atomic
def job_cancel(*, job_id: UUID, requested_by: str) -> Job:
    job = _locked_job(job_id)
    if job.status not in ACTIVE_JOB_STATUSES:
        raise Conflict(f"Job {job.id} already ended as {job.status}.")
    job.status, job.finished_at, job.failure_reason = (
        JobStatus.CANCELLED,
        timezone.now(),
        f"cancelled by {requested_by}",
    )
    job.save(update_fields=["status", "finished_at", "failure_reason", "updated_at"])
    _release([job.id])
    _close_executions(job, f"the job was cancelled by {requested_by}")
    return job


def _close_executions(job: Job, error: str) -> None:
    from fleet.burnin.executions import executions_abandon

    executions_abandon(job_ids=[job.id], error=error)


def _ensure_owner(job: Job, satellite_id: UUID | None) -> None:
    if satellite_id is not None and job.satellite_id != satellite_id:
        from fleet.core.errors import PermissionDeniedError

        raise PermissionDeniedError("This job belongs to another satellite.")


def active_holds(device_ids: Sequence[UUID]) -> dict[UUID, Job]:
    """The active job holding each of these devices (one query)."""
    rows = JobDevice.objects.filter(active=True, device_id__in=list(device_ids)).select_related("job")
    return {row.device_id: row.job for row in rows}
