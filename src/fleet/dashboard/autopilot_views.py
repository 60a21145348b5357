"""The dashboard's autopilot page of a site: its settings, whether it is paused (by whom, why),
devices under test against its limit, and its log newest first; pause and resume, each
Post/Redirect/Get with a one-time token and a ticked confirmation (`fleet.dashboard.actions`),
through the same services as the rest (`fleet.autopilot.services`)."""

from __future__ import annotations

from typing import Any
from uuid import uuid4

from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import reverse
from django.views import View

from fleet.autopilot.selectors import site_autopilot, site_log, under_test_count
from fleet.autopilot.services import autopilot_pause, autopilot_resume
from fleet.core.exceptions import FleetError
from fleet.dashboard import access
from fleet.dashboard.actions import no_store, refused, see_other
from fleet.dashboard.forms import AutopilotPauseForm, AutopilotResumeForm, query_problems
from fleet.inventory.identity import actor_label
from fleet.inventory.selectors import site_by_slug
from fleet.jobs.receipts import action_once
from fleet_rules.vocabulary import PersonAction

LOG_PAGE = 50


class AutopilotPage(access.Page, View):
    permission_required = access.VIEW_DEVICES

    def get(self, request: HttpRequest, slug: str) -> HttpResponse:
        site = site_by_slug(slug)
        page = Paginator(site_log(site), LOG_PAGE).get_page(request.GET.get("page"))
        context: dict[str, Any] = {
            "site": site,
            "autopilot": site_autopilot(site),
            "under_test": under_test_count(site),
            "page": page,
            "token": uuid4(),  # each form's one-time token
            "can_operate": request.user.has_perm(access.DISPATCH),
        }
        return no_store(render(request, "dashboard/autopilot.html", context))


class _Toggle(access.Page, View):
    permission_required = access.DISPATCH
    action = "pause and resume the autopilot"

    def act(
        self, request: HttpRequest, slug: str, form: Any, person_action: PersonAction, perform_service
    ) -> HttpResponse:
        if not form.is_valid():
            return refused(request, query_problems(form), 400)
        site = site_by_slug(slug)
        location = reverse("dashboard:autopilot", args=[slug])

        def perform() -> tuple[str, dict[str, Any]]:
            perform_service(site, form.cleaned_data)
            return location, {}

        try:
            receipt = action_once(
                token=form.cleaned_data["token"],
                action=person_action,
                subject=f"site {slug}",
                requested_by=actor_label(request.user),
                perform=perform,
            )
        except FleetError as exc:
            return refused(request, exc.detail, exc.status_code, location, "Back to the autopilot (as it is now)")
        return see_other(receipt.location)


class PauseAutopilot(_Toggle):
    def post(self, request: HttpRequest, slug: str) -> HttpResponse:
        actor = actor_label(request.user)
        return self.act(
            request,
            slug,
            AutopilotPauseForm(request.POST),
            PersonAction.AUTOPILOT_PAUSE,
            lambda site, data: autopilot_pause(site=site, actor=actor, reason=data["reason"]),
        )


class ResumeAutopilot(_Toggle):
    def post(self, request: HttpRequest, slug: str) -> HttpResponse:
        actor = actor_label(request.user)
        return self.act(
            request,
            slug,
            AutopilotResumeForm(request.POST),
            PersonAction.AUTOPILOT_RESUME,
            lambda site, data: autopilot_resume(site=site, actor=actor),
        )
