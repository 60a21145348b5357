"""The pages around people's state-changing actions: a rerun dispatch's result (as recorded with
its token), a job's cancel confirmation, and a culprit isolation plan followed round by round."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from uuid import UUID

from fleet.burnin.diagnosis.isolation import isolation_plan_get, plan_data
from fleet.burnin.reads.outcomes import job_outcomes
from fleet.core.exceptions import NotFoundError
from fleet.inventory.models import Site
from fleet.inventory.selectors import site_by_slug
from fleet.jobs.models import Job
from fleet.jobs.receipts import Receipt, receipt_of
from fleet.jobs.selectors import job_get
from fleet_rules.jobs import JobOutcome
from fleet_rules.vocabulary import PersonAction


@dataclass(frozen=True)
class RerunResultRead:
    site: Site
    receipt: Receipt  # its `result` is `fleet.burnin.reruns.service.dispatch_record`


def rerun_result_page(slug: str, token: UUID) -> RerunResultRead:
    """A dispatch's result by its token (two queries); `NotFoundError` for a token no dispatch at
    this site used."""
    site = site_by_slug(slug)
    receipt = receipt_of(token)
    if receipt is None or receipt.action != PersonAction.RERUN_DISPATCH or receipt.subject != f"site {site.slug}":
        raise NotFoundError(f"No rerun dispatch {token} at {site.slug}.")
    return RerunResultRead(site, receipt)


@dataclass(frozen=True)
class JobCancelRead:
    job: Job
    held: list[str]  # hostnames of the devices the job holds now
    used: Receipt | None  # when this confirmation's token was already used
    outcome: JobOutcome  # what it came to, in the words of the jobs list


def job_cancel_page(job_id: UUID, token: UUID) -> JobCancelRead:
    """The job to cancel with its devices (`NotFoundError` when unknown), whether this
    confirmation was already used, and what the job came to (four queries)."""
    job = job_get(job_id)
    held = [jd.device.hostname for jd in job.job_devices.all() if jd.active]
    return JobCancelRead(job, held, receipt_of(token), job_outcomes([job])[job.id])


@dataclass(frozen=True)
class IsolationPlanRead:
    site: Site
    plan: dict[str, Any]  # `fleet.burnin.diagnosis.isolation.plan_data`: every device named


def isolation_plan_page(slug: str, plan_id: UUID) -> IsolationPlanRead:
    site = site_by_slug(slug)
    return IsolationPlanRead(site, plan_data(isolation_plan_get(site=site, plan_id=plan_id)))
