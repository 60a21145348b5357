"""One job (`/jobs/<uuid>/`): the job, the executions it reported and what it came to
(`fleet.burnin.reads.outcomes`)."""

from __future__ import annotations

from dataclasses import dataclass
from uuid import UUID

from fleet.burnin.models import TestExecution
from fleet.burnin.reads.device import HISTORY_LIMIT, Attempt, attempt_verdict
from fleet.burnin.reads.outcomes import job_outcomes
from fleet.inventory.models import Site
from fleet.jobs.models import Job
from fleet.jobs.selectors import job_get
from fleet_rules.jobs import JobOutcome


def executions_of_job(job_id: UUID) -> list[Attempt]:
    """The executions a job reported, with their verdict once evaluated (one query)."""
    return [
        Attempt(
            e.id,
            e.requirement.name,
            e.device.hostname if e.device else (e.topology.label if e.topology else ""),
            e.status,
            attempt_verdict(e),
            e.started_at,
            e.finished_at,
            e.job_id,
        )
        for e in TestExecution.objects.filter(job_id=job_id)
        .select_related("requirement", "evaluation", "device", "topology")
        .order_by("created_at", "id")[:HISTORY_LIMIT]
    ]


@dataclass(frozen=True)
class JobDetailRead:
    job: Job
    executions: list[Attempt]
    site: Site
    outcome: JobOutcome


def job_detail_page(job_id: UUID) -> JobDetailRead:
    """The job (`NotFoundError` when unknown), its executions and its outcome (four queries)."""
    job = job_get(job_id)
    return JobDetailRead(job, executions_of_job(job.id), job.site, job_outcomes([job])[job.id])
