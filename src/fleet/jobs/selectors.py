"""Job reads for people: bounded pages of jobs, one job with its devices, active jobs per site."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from uuid import UUID

from django.db.models import Count, Prefetch, Q, QuerySet

from fleet.core.exceptions import NotFoundError
from fleet.jobs.models import Job, JobDevice
from fleet_rules.vocabulary import ACTIVE_JOB_STATUSES


def _with_devices(jobs: QuerySet[Job]) -> QuerySet[Job]:
    return jobs.select_related("site", "satellite", "topology").prefetch_related(
        Prefetch("job_devices", queryset=JobDevice.objects.select_related("device").order_by("device__hostname"))
    )


@dataclass(frozen=True)
class JobPage:
    jobs: list[Job]
    next_before: tuple[datetime, UUID] | None  # newest first: the next page starts before this job


def job_page(
    *,
    site_id: UUID | None = None,
    statuses: Sequence[str] = (),
    before: tuple[datetime, UUID] | None = None,
    limit: int = 50,
) -> JobPage:
    """Jobs, newest first, keyset-paginated (two queries: the jobs, then their devices)."""
    jobs = Job.objects.all()
    if site_id is not None:
        jobs = jobs.filter(site_id=site_id)
    if statuses:
        jobs = jobs.filter(status__in=list(statuses))
    if before is not None:
        at, job_id = before
        jobs = jobs.filter(Q(created_at__lt=at) | Q(created_at=at, id__lt=job_id))
    page = list(_with_devices(jobs.order_by("-created_at", "-id"))[: limit + 1])
    more = len(page) > limit
    page = page[:limit]
    return JobPage(page, (page[-1].created_at, page[-1].id) if more and page else None)


def job_get(job_id: UUID) -> Job:
    """One job with its site, satellite, topology and devices (two queries)."""
    job = _with_devices(Job.objects.filter(id=job_id)).first()
    if job is None:
        raise NotFoundError(f"No job {job_id}.")
    return job


def active_job_counts(site_ids: Sequence[UUID]) -> dict[UUID, int]:
    """Active (queued or running) jobs per site (one query)."""
    rows = (
        Job.objects.filter(site_id__in=list(site_ids), status__in=ACTIVE_JOB_STATUSES)
        .values_list("site_id")
        .annotate(n=Count("id"))
        .order_by()
    )
    return dict(rows)


@dataclass(frozen=True)
class Holding:
    """An active job holding some of a set of devices: what a refusal names and links."""

    job_id: UUID
    status: str
    workflow_name: str
    topology: str  # its rack's or domain's label, or ""
    hostnames: tuple[str, ...]  # the devices of the set it holds


def jobs_holding(device_ids: Sequence[UUID]) -> list[Holding]:
    """The active jobs that hold any of these devices, oldest first (one query)."""
    rows = (
        JobDevice.objects.filter(active=True, device_id__in=list(device_ids))
        .order_by("job__created_at", "job_id", "device__hostname")
        .values_list("job_id", "job__status", "job__workflow_name", "job__topology__label", "device__hostname")
    )
    held: dict[UUID, Holding] = {}
    for job_id, status, workflow, topology, hostname in rows:
        known = held.get(job_id)
        hostnames = (*known.hostnames, hostname) if known else (hostname,)
        held[job_id] = Holding(job_id, status, workflow, topology or "", hostnames)
    return list(held.values())
