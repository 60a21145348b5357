"""What jobs came to, in words ("finished — 2 of 2 tests failed", `fleet_rules.jobs.job_outcome`):
for the job page, the jobs list and the device page's jobs."""

from __future__ import annotations

from collections.abc import Sequence
from uuid import UUID

from django.db.models import Count, Q

from fleet.burnin.models import TestExecution
from fleet.jobs.models import Job
from fleet_rules.jobs import JobOutcome, JobTally, job_outcome
from fleet_rules.vocabulary import ExecutionStatus


def job_outcomes(jobs: Sequence[Job]) -> dict[UUID, JobOutcome]:
    """Each job's outcome from its executions, counted by how they stand (one query). A job is
    asked to run each of its requirements on each device, or once on its topology. A culprit
    isolation round's job counts its own (diagnostic) runs: it reported them, and "only 0 of 1
    reported" would say otherwise."""
    finished = Q(status=ExecutionStatus.COMPLETED)
    counts = {
        row["job_id"]: row
        for row in TestExecution.objects.filter(job_id__in=[j.id for j in jobs])
        .values("job_id")
        .annotate(
            running=Count("id", filter=Q(status=ExecutionStatus.RUNNING)),
            passed=Count("id", filter=finished & Q(evaluation__passed=True)),
            failed=Count("id", filter=finished & Q(evaluation__passed=False)),
            errored=Count("id", filter=Q(status=ExecutionStatus.ERRORED)),
            unevaluated=Count("id", filter=finished & Q(evaluation__isnull=True)),
        )
        .order_by()
    }
    outcomes = {}
    for job in jobs:
        row = counts.get(job.id, {})
        runs_on = 1 if job.topology_id else len(job.job_devices.all())
        tally = JobTally(
            expected=len(job.requirement_names) * max(runs_on, 1),
            **{k: row.get(k, 0) for k in ("running", "passed", "failed", "errored", "unevaluated")},
        )
        outcomes[job.id] = job_outcome(job.status, tally)
    return outcomes
