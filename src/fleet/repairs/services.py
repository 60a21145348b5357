"""Recording a repair: the device leaves `needs_repair` (or maintenance) for `burn_in`, its
attempts before the repair stop counting, and its re-burn-in is dispatched through the standard
job path (every requirement again by default: a repaired device proves everything). Closing a
circuit breaker re-judges the moves it held (failed too often, or a fatal Xid)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any
from uuid import UUID

from django.db import transaction
from django.db.models import F
from django.db.models.functions import Collate
from django.utils import timezone

from fleet.burnin.models import PolicyProgress
from fleet.burnin.repair_due import failed_targets_moves
from fleet.burnin.reruns.load import lock_involved_devices
from fleet.burnin.reruns.service import DispatchOutcome, rerun_dispatch
from fleet.core.exceptions import Conflict, NotFoundError
from fleet.core.locks import lock_keys_in_order
from fleet.core.models import new_uuid
from fleet.events.outbox import device_draft, events_record
from fleet.inventory.models import Device, Site
from fleet.lifecycle.breakers import Guarded, breaker_close, breaker_event
from fleet.lifecycle.models import Breaker, DeviceStateChange, Repair
from fleet.lifecycle.services import AutomaticMove, Move, transitions_apply
from fleet_rules import lifecycle as rules
from fleet_rules.vocabulary import DeviceState, EventType, Mover, PlanningMode, RepairRerun, TransitionCause

RERUN_MODES = {RepairRerun.ALL: PlanningMode.ALL, RepairRerun.FAILED: PlanningMode.NON_PASSING}


@dataclass(frozen=True)
class Recorded:
    repair: Repair
    device: Device
    dispatch: DispatchOutcome


@transaction.atomic
def repair_record(
    *, device_id: UUID, summary: str, parts: Sequence[dict[str, Any]], rerun: RepairRerun, actor: str
) -> Recorded:
    """Record a repair of a device in `needs_repair` or `maintenance` (409 otherwise), move it to
    `burn_in` and dispatch its re-burn-in, in one transaction."""
    # No attempt before the repair counts: its projection rows' outcomes start again (flaky rates).
    # Locked as a reconcile page locks them — the rows first, in the page's (requirement name,
    # target) order, then their devices — so the two wait for each other, never in a circle; a
    # refused repair rolls the reset back.
    rows = PolicyProgress.objects.filter(device_id=device_id)
    lock_keys_in_order(rows, Collate(F("requirement__name"), "C"), "target_id")
    rows.update(outcomes=0)
    # The device and the rack mates its re-burn-in involves, locked in primary-key order as every
    # writer of devices locks them: locking the device alone first, then its rack mates (in the
    # dispatch), deadlocked against a dispatch of the rack.
    lock_involved_devices([device_id])
    # The lifecycle's writer checks and makes the move (once); the repair it refers to is written
    # only when it moved.
    now, repair_id = timezone.now(), new_uuid()
    move = Move(
        device_id,
        DeviceState.BURN_IN,
        Mover.SYSTEM,
        TransitionCause.REPAIR,
        actor,
        summary,
        {"repair": str(repair_id)},
    )
    for refused in transitions_apply([move], now=now).refused:
        if refused.state is None:
            raise NotFoundError(refused.why)
        raise Conflict(
            f"{refused.hostname} is {refused.state}: only a device in needs_repair or maintenance is repaired "
            "(a repair brings it back to burn-in)."
        )
    device = Device.objects.select_related("site").get(id=device_id)
    repair = Repair.objects.create(
        id=repair_id,
        device=device,
        summary=summary.strip(),
        parts=list(parts),
        actor=actor,
        created_at=now,
        rerun_mode=rerun,
    )
    outcome = rerun_dispatch(site=device.site, device_ids=[device.id], mode=RERUN_MODES[rerun], requested_by=actor)
    repair.job_ids = [str(j.job_id) for j in outcome.created_jobs]
    repair.save(update_fields=["job_ids"])
    events_record(
        [
            device_draft(
                EventType.REPAIR_RECORDED,
                device,
                {
                    "repair_id": str(repair.id),
                    "summary": repair.summary,
                    "parts": repair.parts,
                    "rerun": rerun.value,
                    "actor": actor,
                    "job_ids": repair.job_ids,
                },
            )
        ],
        now=now,
    )
    return Recorded(repair, device, outcome)


@dataclass(frozen=True)
class Reset:
    breaker: Breaker
    rejudged: Guarded


@transaction.atomic
def breaker_reset(*, site: Site, resource_class: str, actor: str, reason: str) -> Reset:
    """Close the open breaker of a site × class (404 when none is open): the operator says the
    hardware really is broken. What it held goes to repair now — a device held for failing too often
    if it still does since its last repair (counted again), one held for a fatal Xid or named by
    isolation as it was held (those stay facts) — and its window starts over from the reset."""
    breaker = Breaker.objects.filter(site=site, resource_class=resource_class, closed_at__isnull=True).first()
    if breaker is None:
        raise NotFoundError(f"No open breaker for {resource_class} at {site.slug}.")
    held = (
        DeviceStateChange.objects.filter(
            held=True,
            device__site=site,
            device__resource_class=resource_class,
            at__gte=breaker.opened_at,
            device__state__in=[s.value for s in rules.transition_sources(DeviceState.NEEDS_REPAIR)],
        )
        .order_by("device_id", "-at", "-id")
        .distinct("device_id")
        .values_list("device_id", "refs", "reason")
    )
    failing: set[tuple[UUID, UUID]] = set()
    facts: list[AutomaticMove] = []
    for device_id, refs, why in held:
        cause = TransitionCause(refs.get("held_cause", TransitionCause.FAILED_TOO_OFTEN))
        if cause == TransitionCause.FAILED_TOO_OFTEN:
            if refs.get("requirement_id"):
                failing.add((device_id, UUID(refs["requirement_id"])))
            continue
        kept = {k: v for k, v in refs.items() if k != "held_cause"}
        facts.append(AutomaticMove(device_id, DeviceState.NEEDS_REPAIR, cause, why, kept))
    admitted = failed_targets_moves(failing) + facts
    closed = breaker_close(breaker=breaker, actor=actor, reason=reason, admitted=admitted)
    events_record([breaker_event(closed.breaker, site.slug, EventType.BREAKER_RESET)], now=timezone.now())
    return Reset(closed.breaker, Guarded(closed.applied.moved, [], []))
