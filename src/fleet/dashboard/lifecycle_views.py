"""The dashboard's lifecycle pages: a site's repair queue (devices in needs_repair, why, since
when) with its circuit breakers, and the two actions on them — recording a repair (the device goes
back to burn-in and is dispatched again) and closing a breaker. Both actions are Post/Redirect/Get
with a one-time token (`fleet.dashboard.actions`), through the same services as the API."""

from __future__ import annotations

from dataclasses import fields
from typing import Any
from uuid import uuid4

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import reverse
from django.utils import timezone
from django.views import View

from fleet.core.exceptions import FleetError
from fleet.dashboard import access
from fleet.dashboard.actions import no_store, refused, see_other, token_of, with_token
from fleet.dashboard.forms import BreakerResetForm, RepairForm, query_problems
from fleet.inventory.identity import actor_label
from fleet.jobs.receipts import action_once
from fleet.repairs.reads import repair_page, repair_queue_page
from fleet.repairs.services import breaker_reset, repair_record
from fleet_rules.explanations import SKIP_EXPLANATIONS, STATE_SIGNS
from fleet_rules.lifecycle import automatic_sources
from fleet_rules.vocabulary import DeviceState, PersonAction, RepairRerun, TransitionCause

#: The states a repair moves a device out of (the transition table's sources of a repair).
REPAIRABLE = tuple(sorted(automatic_sources(DeviceState.BURN_IN, TransitionCause.REPAIR)))


class RepairQueuePage(access.Page, View):
    permission_required = access.VIEW_DEVICES

    def get(self, request: HttpRequest, slug: str) -> HttpResponse:
        read = repair_queue_page(slug)
        context = {f.name: getattr(read, f.name) for f in fields(read)} | {
            # each breaker's close form carries its own one-time token
            "open_breakers": [(b, uuid4()) for b in read.open_breakers],
            "rendered_at": timezone.now(),
        }
        return no_store(render(request, "dashboard/repairs.html", context))


class RecordRepair(access.Page, View):
    """GET: the repair form for a device in needs_repair or maintenance, saying what recording it
    does; POST: record it (and dispatch the re-burn-in), once per token."""

    permission_required = (access.REPAIR, access.DISPATCH)
    action = "record repairs"
    template = "dashboard/repair.html"

    def get(self, request: HttpRequest, slug: str, hostname: str) -> HttpResponse:
        if "token" not in request.GET:
            return with_token(request)
        token = token_of(request)
        if token is None:
            return refused(request, "Not a form token: open the repair form again.", 400)
        read = repair_page(slug, hostname, token)
        form = RepairForm(initial={"token": token, "rerun": RepairRerun.ALL})
        return no_store(render(request, self.template, {"read": read, "form": form, "token": token}))

    def post(self, request: HttpRequest, slug: str, hostname: str) -> HttpResponse:
        form = RepairForm(request.POST)
        if not form.is_valid():
            return refused(request, query_problems(form), 400)
        token = form.cleaned_data["token"]
        read = repair_page(slug, hostname, token)
        location = reverse("dashboard:device", args=[slug, hostname])

        def perform() -> tuple[str, dict[str, Any]]:
            recorded = repair_record(
                device_id=read.device.id,
                summary=form.cleaned_data["summary"],
                parts=form.parts(),
                rerun=RepairRerun(form.cleaned_data["rerun"]),
                actor=actor_label(request.user),
            )
            skipped = [f"{s.requirement_name}: {SKIP_EXPLANATIONS[s.reason]}" for s in recorded.dispatch.plan.skips]
            return location, {"repair": str(recorded.repair.id), "jobs": recorded.repair.job_ids, "skipped": skipped}

        try:
            receipt = action_once(
                token=token,
                action=PersonAction.REPAIR_RECORD,
                subject=f"device {read.device.id}",
                requested_by=actor_label(request.user),
                perform=perform,
            )
        except FleetError as exc:
            again = reverse("dashboard:repair-form", args=[slug, hostname])
            now = repair_page(slug, hostname, token)
            message = exc.detail if now.repairable else not_repairable(hostname, now.device.state)
            return refused(request, message, exc.status_code, again, REPAIR_AGAIN)
        return see_other(receipt.location)


REPAIR_AGAIN = "Open the repair form again (it shows the device as it is now)"


def not_repairable(hostname: str, state: str) -> str:
    """Why a repair was not recorded, in the dashboard's words for states (`STATE_SIGNS`): the
    device moved since its form was opened (another person recorded the repair, say)."""
    sign, word = STATE_SIGNS[DeviceState(state)]
    repairable = " or ".join(f"{STATE_SIGNS[s][0]} {STATE_SIGNS[s][1]}" for s in REPAIRABLE)
    return (
        f"{hostname} is {sign} {word} now, so no repair was recorded: only a device whose state is {repairable} "
        "is repaired "
        f"(recording a repair brings it back to {STATE_SIGNS[DeviceState.BURN_IN][1]})."
    )


class ResetBreaker(access.Page, View):
    """POST from the repair queue's banner: close a site's breaker of one class and judge again what
    it held, once per token."""

    permission_required = access.REPAIR
    action = "close circuit breakers"

    def post(self, request: HttpRequest, slug: str, resource_class: str) -> HttpResponse:
        form = BreakerResetForm(request.POST)
        if not form.is_valid():
            return refused(request, query_problems(form), 400)
        read = repair_queue_page(slug)
        location = reverse("dashboard:repairs", args=[slug])

        def perform() -> tuple[str, dict[str, Any]]:
            reset = breaker_reset(
                site=read.site,
                resource_class=resource_class,
                actor=actor_label(request.user),
                reason=form.cleaned_data["reason"],
            )
            return location, {"moved": len(reset.rejudged.moved), "held": len(reset.rejudged.held)}

        try:
            receipt = action_once(
                token=form.cleaned_data["token"],
                action=PersonAction.BREAKER_RESET,
                subject=f"site {slug} {resource_class}",
                requested_by=actor_label(request.user),
                perform=perform,
            )
        except FleetError as exc:
            return refused(request, exc.detail, exc.status_code, location)
        return see_other(receipt.location)
