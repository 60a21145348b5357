"""The repair queue of a site: devices in `needs_repair`, oldest first, each with why (the
requirement, its failures since the last repair and the failing rule, or the isolation finding)
and since when. Two queries whatever the queue's length; at most `limit` devices."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any
from uuid import UUID

from django.db.models import Count, F, OuterRef, Subquery
from django.db.models.functions import Coalesce, Now

from fleet.burnin.models import EvaluationResult
from fleet.burnin.reads.failures import failure_explained
from fleet.core.exceptions import NotFoundError
from fleet.inventory.models import Device, Site
from fleet.inventory.selectors import site_by_slug
from fleet.jobs.receipts import Receipt, receipt_of
from fleet.lifecycle.models import Breaker, DeviceStateChange
from fleet.lifecycle.selectors import repair_entries
from fleet_rules.lifecycle import refusal
from fleet_rules.vocabulary import DeviceState, Mover, TransitionCause

QUEUE_LIMIT = 100


@dataclass(frozen=True)
class QueuedDevice:
    device_id: UUID
    hostname: str
    serial: str
    resource_class: str
    since: datetime | None
    cause: str
    reason: str
    requirement: str | None
    failures: int | None
    execution_id: UUID | None
    measured: str | None

    @property
    def measured_apart(self) -> str | None:
        """What was measured, when the reason does not say it already (the page's second line)."""
        return self.measured if self.measured and self.measured not in self.reason else None


def repair_queue(site: Site, *, limit: int = QUEUE_LIMIT) -> tuple[list[QueuedDevice], bool]:
    """(devices oldest first, whether more wait)."""
    entered = repair_entries().filter(device=OuterRef("pk"))
    found = list(
        Device.objects.filter(site=site, state=DeviceState.NEEDS_REPAIR)
        .annotate(
            since=Subquery(entered.values("at")[:1]),
            cause=Subquery(entered.values("cause")[:1]),
            reason=Subquery(entered.values("reason")[:1]),
            refs=Subquery(entered.values("refs")[:1]),
        )
        .order_by("since", "hostname")
        .values("id", "hostname", "serial", "resource_class", "since", "cause", "reason", "refs")[: limit + 1]
    )
    more = len(found) > limit
    rows = found[:limit]
    executions = {_execution(r["refs"]) for r in rows} - {None}
    measured = _measured(executions)
    queued = []
    for r in rows:
        refs: dict[str, Any] = r["refs"] or {}
        execution_id = _execution(refs)
        said = measured.get(execution_id) if execution_id else None
        reason = r["reason"] or ""
        if said and r["cause"] == TransitionCause.FAILED_TOO_OFTEN:
            reason = f"{reason}: {said}"  # the count, and what failed against what
        queued.append(
            QueuedDevice(
                device_id=r["id"],
                hostname=r["hostname"],
                serial=r["serial"],
                resource_class=r["resource_class"],
                since=r["since"],
                cause=r["cause"] or "",
                reason=reason,
                requirement=refs.get("requirement"),
                failures=refs.get("failures"),
                execution_id=execution_id,
                measured=said,
            )
        )
    return queued, more


def _measured(execution_ids: set[UUID | None]) -> dict[UUID, str]:
    """Each execution's failing rules as the failures list says them (`busbw_gbps 288.44 GB/s is
    below ≥ 431 GB/s (−33.1 %)`), or its error or evaluation's reason when no rule explains it (one
    query)."""
    return {
        evaluation.execution.id: failure_explained(
            evaluation.execution, evaluation, evaluation.execution.requirement.metric_units
        ).text()
        for evaluation in EvaluationResult.objects.filter(execution_id__in=execution_ids).select_related(
            "execution", "execution__requirement"
        )
    }


def _execution(refs: dict[str, Any] | None) -> UUID | None:
    value = (refs or {}).get("execution")
    return UUID(value) if value else None


@dataclass(frozen=True)
class BreakerRead:
    id: UUID
    resource_class: str
    open: bool
    opened_at: datetime
    detail: str
    closed_at: datetime | None
    closed_by: str
    close_reason: str
    held: int


def site_breakers(site: Site, *, limit: int = QUEUE_LIMIT) -> list[BreakerRead]:
    """The site's breakers, open ones first, then the newest closed; each with the moves it held
    (one query)."""
    held = (
        DeviceStateChange.objects.filter(
            held=True,
            device__site=site,
            device__resource_class=OuterRef("resource_class"),
            at__gte=OuterRef("opened_at"),
        )
        .filter(at__lte=Coalesce(OuterRef("closed_at"), Now()))
        .order_by()
        .values("device__site")
        .annotate(n=Count("id"))
        .values("n")
    )
    rows = (
        Breaker.objects.filter(site=site)
        .annotate(held_count=Coalesce(Subquery(held[:1]), 0))
        .order_by(F("closed_at").desc(nulls_first=True), "-opened_at")[:limit]
    )
    return [
        BreakerRead(
            b.id,
            b.resource_class,
            b.closed_at is None,
            b.opened_at,
            b.detail,
            b.closed_at,
            b.closed_by,
            b.close_reason,
            b.held_count,
        )
        for b in rows
    ]


@dataclass(frozen=True)
class RepairQueuePage:
    """The repair queue page (`/sites/<slug>/repairs/`): the devices waiting, and the breakers."""

    site: Site
    queued: list[QueuedDevice]
    more: bool
    breakers: list[BreakerRead]

    @property
    def open_breakers(self) -> list[BreakerRead]:
        return [b for b in self.breakers if b.open]


def repair_queue_page(slug: str) -> RepairQueuePage:
    site = site_by_slug(slug)
    queued, more = repair_queue(site)
    return RepairQueuePage(site, queued, more, site_breakers(site))


@dataclass(frozen=True)
class RepairPageRead:
    """The repair form of one device: the device, why it waits (when it does), whether its state
    takes a repair, and whether this form's token was already used."""

    site: Site
    device: Device
    entered: DeviceStateChange | None  # the change that sent it to repair
    repairable: bool
    used: Receipt | None


def repair_page(slug: str, hostname: str, token: UUID) -> RepairPageRead:
    site = site_by_slug(slug)
    device = Device.objects.filter(site=site, hostname=hostname).first()
    if device is None:
        raise NotFoundError(f"No device {hostname!r} at site {slug!r}.")
    entered = repair_entries().filter(device=device).first()
    # the rule `repair_record` applies: the table lets a repair move the device to burn-in
    repairable = refusal(device.state, DeviceState.BURN_IN, Mover.SYSTEM, TransitionCause.REPAIR) is None
    return RepairPageRead(site, device, entered, repairable, receipt_of(token))
