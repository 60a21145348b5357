"""The dashboard's state-changing actions — rerun dispatch, job cancel, culprit isolation — each
Post/Redirect/Get with a one-time token (`fleet.jobs.receipts`):

* a preview (a GET page, `Cache-Control: no-store` so that back re-fetches it) names exactly what
  the action will touch and carries a fresh token in its form; once its token is used it says so
  and links the result instead of offering the button again;
* the POST acts through the same service as the API and the CLI, records the token with its result
  in the same transaction, and redirects (303) to the result's GET page; a reloaded or replayed
  POST is redirected to the first result and creates nothing;
* cancelling, and dispatching to more than one device, need a ticked confirmation stating what
  will happen (a required checkbox: no script, the CSP is strict).

A rerun selection can be thousands of devices ("every failing device") or a page of ticked boxes,
more than a URL holds: the preview keeps it in the person's session under its token."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode
from uuid import UUID, uuid4

from django.core.exceptions import ValidationError
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect, QueryDict
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views import View

from fleet.burnin.diagnosis import isolation
from fleet.burnin.reads.actions import isolation_plan_page, job_cancel_page, rerun_result_page
from fleet.burnin.reruns.selection import RerunSelection, device_hostnames, selection_devices, selection_only
from fleet.burnin.reruns.service import dispatch_record, rerun_dispatch, rerun_plan_preview
from fleet.core.exceptions import FleetError
from fleet.dashboard import access
from fleet.dashboard.forms import (
    ALL_FAILED,
    CancelForm,
    IsolationDispatchForm,
    IsolationForm,
    RerunDispatchForm,
    RerunForm,
    query_problems,
)
from fleet.inventory.identity import actor_label
from fleet.inventory.selectors import devices_in_repair, site_by_slug
from fleet.jobs.receipts import action_once, receipt_of
from fleet.jobs.selectors import Holding, jobs_holding
from fleet.jobs.services import JobRefused, job_cancel
from fleet_rules.vocabulary import PersonAction, PlanningMode

#: Session key of the rerun selections previewed lately (token → site and fields), newest last.
PREVIEWS = "fleet-rerun-previews"
PREVIEWS_KEPT = 20


def see_other(location: str, status: int = 303) -> HttpResponseRedirect:
    """After a POST: 303 See Other, so that the browser GETs the result and a reload re-sends nothing."""
    response = HttpResponseRedirect(location)
    response.status_code = status
    return response


def no_store(response: HttpResponse) -> HttpResponse:
    """A preview is never shown from the cache: back re-fetches it, and it can say it was used."""
    response["Cache-Control"] = "no-store"
    return response


#: What the refusal's link back to the action's first page says, unless told otherwise.
PREVIEW_AGAIN = "Preview again (the preview shows the plan as it is now)"


def refused(
    request: HttpRequest, message: str, status: int, again: str | None = None, again_words: str = PREVIEW_AGAIN
) -> HttpResponse:
    context = {"message": message, "again": again, "again_words": again_words}
    return render(request, "dashboard/action_refused.html", context, status=status)


def with_token(request: HttpRequest) -> HttpResponse:
    """A preview or confirmation asked for without a token: the same page under a fresh one, so
    that its URL (reload, back) keeps naming the one token its form carries."""
    query = request.GET.copy()
    query["token"] = str(uuid4())
    return redirect(f"{request.path}?{query.urlencode()}")


def token_of(request: HttpRequest) -> UUID | None:
    try:
        return UUID(request.GET.get("token", ""))
    except ValueError:
        return None


# --- reruns ---------------------------------------------------------------------------------------------


def _selection(data: dict[str, Any]) -> RerunSelection:
    return RerunSelection(
        all_failed=data.get("select") == ALL_FAILED,
        topology=data.get("topology") or None,
        devices=tuple(data["device"]),
        targets=tuple(data["target"]),
    )


class RerunPreview(access.Page, View):
    """A selection (posted by the grid, the failures list, a device page) → a preview page under a
    token; the page shows the jobs a dispatch would create now and why everything else would not."""

    permission_required = access.DISPATCH
    action = "preview and dispatch reruns"
    template = "dashboard/rerun_preview.html"

    def post(self, request: HttpRequest, slug: str) -> HttpResponse:
        return self.keep(request, slug, request.POST, status=303)

    def handle_no_permission(self) -> Any:
        """A selection posted after the session ended is not lost: it is kept in the (new,
        anonymous) session under a token, and signing in again lands on its preview — Django's
        login keeps the session's data when it starts the signed-in session."""
        request = self.request
        if request.method == "POST" and not request.user.is_authenticated and not getattr(request, "htmx", False):
            slug = str(self.kwargs.get("slug", ""))
            token = _kept(request, slug, request.POST)
            preview = reverse("dashboard:rerun-previewed", args=[slug, token])
            return see_other(f"{reverse('login')}?{urlencode({'next': preview})}")
        return super().handle_no_permission()

    def keep(self, request: HttpRequest, slug: str, data: QueryDict, status: int) -> HttpResponse:
        """Keep the selection under a fresh token and send the person to its preview page."""
        site = site_by_slug(slug)
        form = RerunForm(data)
        if not form.is_valid():
            return render(request, self.template, {"site": site, "form": form}, status=400)
        token = _kept(request, site.slug, data)
        return see_other(reverse("dashboard:rerun-previewed", args=[site.slug, token]), status)

    def get(self, request: HttpRequest, slug: str, token: UUID | None = None) -> HttpResponse:
        if token is None:  # a bookmarked selection (`?topology=rack-a01`): a preview of its own
            return self.keep(request, slug, request.GET, status=302)
        site = site_by_slug(slug)
        used = receipt_of(token)
        if used is not None:
            return no_store(render(request, self.template, {"site": site, "used": used}))
        form = _previewed(request, site.slug, token)
        if form is None:
            return refused(request, "This preview is not known here (or expired): select again.", 404)
        if not form.is_valid():
            return render(request, self.template, {"site": site, "form": form}, status=400)
        selection = _selection(form.cleaned_data)
        device_ids = selection_devices(site, selection)
        if not device_ids:
            form.add_error(None, "The selection holds no device.")
            return render(request, self.template, {"site": site, "form": form}, status=400)
        mode = form.cleaned_data["mode"]
        try:
            only = selection_only(site, selection)  # ticked failure rows: those requirements alone
            outcome = rerun_plan_preview(site=site, device_ids=device_ids, mode=mode, only=only)
        except ValidationError as exc:
            form.add_error(None, "; ".join(" ".join(m) for m in exc.message_dict.values()))
            return render(request, self.template, {"site": site, "form": form}, status=400)
        touched = outcome.touched
        context = {
            "site": site,
            "form": form,
            "token": token,
            "outcome": outcome,
            "device_ids": device_ids,
            "only": only,
            "targets": [t for t in selection.targets if t.device in only],
            "selection": _posted_again(form),
            "hostnames": device_hostnames([*device_ids, *touched]),
            "touched": touched,
            # the selected devices that wait for a repair: the page says so and links the repair form
            "in_repair": devices_in_repair(device_ids),
            "mode": mode,
            "modes": PlanningMode.values,
        }
        return no_store(render(request, self.template, context))


def _kept(request: HttpRequest, slug: str, data: QueryDict) -> str:
    """Keep a posted selection in the person's session under a fresh token (the newest
    `PREVIEWS_KEPT`)."""
    fields = {k: v for k, v in data.lists() if k not in ("csrfmiddlewaretoken", "token")}
    token = str(uuid4())
    kept = dict(list(request.session.get(PREVIEWS, {}).items())[-(PREVIEWS_KEPT - 1) :])
    request.session[PREVIEWS] = kept | {token: {"site": slug, "fields": fields}}
    return token


def _previewed(request: HttpRequest, slug: str, token: UUID) -> RerunForm | None:
    """The selection previewed under `token` in this person's session, as its form (its data is
    what the person posted, which "Preview again" posts again with another mode)."""
    kept = request.session.get(PREVIEWS, {}).get(str(token))
    if kept is None or kept["site"] != slug:
        return None
    data = QueryDict(mutable=True)
    for key, values in kept["fields"].items():
        data.setlist(key, values)
    return RerunForm(data)


def _posted_again(form: RerunForm) -> list[tuple[str, str]]:
    """The selection's fields as hidden inputs for "Preview again" (the mode is its select)."""
    data = form.data
    assert isinstance(data, QueryDict)  # built by `_previewed`
    return [(key, value) for key, values in data.lists() if key != "mode" for value in values]


class RerunDispatch(access.Page, View):
    """A preview's dispatch: through the Job path (the API's service), once per token."""

    permission_required = access.DISPATCH
    action = "preview and dispatch reruns"

    def post(self, request: HttpRequest, slug: str) -> HttpResponse:
        site = site_by_slug(slug)
        form = RerunDispatchForm(request.POST)
        if not form.is_valid():
            return refused(request, query_problems(form), 400)
        token = form.cleaned_data["token"]
        selection = _previewed(request, site.slug, token)
        if selection is None or not selection.is_valid():
            used = receipt_of(token)
            if used is not None and used.action == PersonAction.RERUN_DISPATCH and used.subject == f"site {slug}":
                return see_other(used.location)
            return refused(request, "This preview is not known here (or expired): select again.", 400)
        chosen = _selection(selection.cleaned_data)
        device_ids = selection_devices(site, chosen)
        location = reverse("dashboard:rerun-result", args=[site.slug, token])

        def perform() -> tuple[str, dict[str, Any]]:
            outcome = rerun_dispatch(
                site=site,
                device_ids=device_ids,
                mode=selection.cleaned_data["mode"],
                requested_by=actor_label(request.user),
                only=selection_only(site, chosen),
                expect=form.cleaned_data["expect"],
            )
            return location, dispatch_record(outcome)

        try:
            receipt = action_once(
                token=token,
                action=PersonAction.RERUN_DISPATCH,
                subject=f"site {site.slug}",
                requested_by=actor_label(request.user),
                perform=perform,
            )
        except ValidationError as exc:
            return refused(request, "; ".join(" ".join(m) for m in exc.message_dict.values()), 400)
        except FleetError as exc:
            again = reverse("dashboard:rerun-previewed", args=[site.slug, token])
            return refused(request, exc.detail, exc.status_code, again)
        return see_other(receipt.location)


class RerunResult(access.Page, View):
    """What a dispatch created (and why the rest was not), as recorded with its token."""

    permission_required = access.VIEW_JOBS

    def get(self, request: HttpRequest, slug: str, token: UUID) -> HttpResponse:
        read = rerun_result_page(slug, token)
        return render(request, "dashboard/rerun_dispatched.html", {"site": read.site, "receipt": read.receipt})


# --- cancel ---------------------------------------------------------------------------------------------


class CancelJob(access.Page, View):
    """GET: the confirmation (what cancelling this job does); POST: cancel it, once per token."""

    permission_required = access.CANCEL
    action = "cancel jobs"
    template = "dashboard/job_cancel.html"

    def get(self, request: HttpRequest, job_id: UUID) -> HttpResponse:
        if "token" not in request.GET:
            return with_token(request)
        token = token_of(request)
        if token is None:
            return refused(request, "Not a form token: open a new confirmation.", 400)
        read = job_cancel_page(job_id, token)
        return no_store(render(request, self.template, {"read": read, "job": read.job, "token": token}))

    def post(self, request: HttpRequest, job_id: UUID) -> HttpResponse:
        form = CancelForm(request.POST)
        if not form.is_valid():
            return refused(request, query_problems(form), 400)
        location = reverse("dashboard:job", args=[job_id])

        def perform() -> tuple[str, dict[str, Any]]:
            job = job_cancel(job_id=job_id, requested_by=actor_label(request.user))
            return location, {"job_id": str(job.id), "status": str(job.status)}

        try:
            receipt = action_once(
                token=form.cleaned_data["token"],
                action=PersonAction.JOB_CANCEL,
                subject=f"job {job_id}",
                requested_by=actor_label(request.user),
                perform=perform,
            )
        except FleetError as exc:
            if exc.status_code == 404:
                raise  # the 404 page, as for every page (access.Page)
            return refused(request, exc.detail, exc.status_code)
        return see_other(receipt.location)


# --- culprit isolation ----------------------------------------------------------------------------------


class IsolationPreview(access.Page, View):
    """A failed rack cohort → its cohort, the bound on rounds and round 1's collectives, and the
    confirmation that starts it."""

    permission_required = access.DISPATCH
    action = "preview and start culprit isolation"
    template = "dashboard/isolation_preview.html"

    def get(self, request: HttpRequest, slug: str) -> HttpResponse:
        site = site_by_slug(slug)
        form = IsolationForm(request.GET)
        if not form.is_valid():
            return refused(request, query_problems(form), 400)
        if "token" not in request.GET:
            return with_token(request)
        token = token_of(request)
        if token is None:
            return refused(request, "Not a form token: open a new preview.", 400)
        used = receipt_of(token)
        if used is not None:
            return no_store(render(request, self.template, {"site": site, "used": used}))
        try:
            preview = isolation.isolation_preview(
                site=site, topology_id=form.cleaned_data["topology"], requirement_name=form.cleaned_data["requirement"]
            )
        except ValidationError as exc:
            return refused(request, "; ".join(" ".join(m) for m in exc.message_dict.values()), 400)
        data = isolation.preview_data(preview)
        running = isolation.running_plan_id(
            site=site, topology_id=form.cleaned_data["topology"], requirement_name=form.cleaned_data["requirement"]
        )
        context = {
            "site": site,
            "preview": data,
            "token": token,
            "running": running,
            # a job holding its devices (a rerun of the rack, say): the page names it and offers the
            # isolation once it ends, instead of a button the service would refuse
            "wait": _waiting(site.slug, form.cleaned_data, jobs_holding(preview.cohort.device_uuids)),
        }
        return no_store(render(request, self.template, context))


def _waiting(slug: str, cohort: dict[str, Any], holding: list[Holding]) -> dict[str, Any]:
    """The "isolate once it ends" panel's context: the jobs holding the cohort, and where to look again."""
    query = urlencode({"topology": str(cohort["topology"]), "requirement": cohort["requirement"]})
    return {
        "holding": holding,
        "again": f"{reverse('dashboard:isolation-wait', args=[slug])}?{query}",
        "preview": f"{reverse('dashboard:isolation-preview', args=[slug])}?{query}",
    }


class IsolationWait(access.Page, View):
    """The live "isolate once it ends" panel of a cohort held by active jobs: it names and links
    them, and once none holds the cohort it offers a fresh preview (one query a look)."""

    permission_required = access.DISPATCH
    action = "preview and start culprit isolation"

    def get(self, request: HttpRequest, slug: str) -> HttpResponse:
        site = site_by_slug(slug)
        form = IsolationForm(request.GET)
        if not form.is_valid():
            return refused(request, query_problems(form), 400)
        try:
            cohort = isolation.cohort_load(
                site=site, topology_id=form.cleaned_data["topology"], requirement_name=form.cleaned_data["requirement"]
            )
        except ValidationError as exc:
            return refused(request, "; ".join(" ".join(m) for m in exc.message_dict.values()), 400)
        wait = _waiting(site.slug, form.cleaned_data, jobs_holding(cohort.device_uuids))
        if getattr(request, "htmx", False):
            return render(request, "dashboard/partials/isolation_wait.html", {"site": site, "wait": wait})
        return redirect(wait["preview"])


class IsolationDispatch(access.Page, View):
    """Start isolation (its first round) through the service `fleet isolate` uses, once per token."""

    permission_required = access.DISPATCH
    action = "preview and start culprit isolation"

    def post(self, request: HttpRequest, slug: str) -> HttpResponse:
        site = site_by_slug(slug)
        form = IsolationDispatchForm(request.POST)
        if not form.is_valid():
            return refused(request, query_problems(form), 400)
        data = form.cleaned_data

        def perform() -> tuple[str, dict[str, Any]]:
            plan = isolation.isolation_dispatch(
                site=site,
                topology_id=data["topology"],
                requirement_name=data["requirement"],
                requested_by=actor_label(request.user),
            )
            return reverse("dashboard:isolation", args=[site.slug, plan.id]), {"plan_id": str(plan.id)}

        try:
            receipt = action_once(
                token=data["token"],
                action=PersonAction.ISOLATION_DISPATCH,
                subject=f"site {site.slug} topology {data['topology']} {data['requirement']}",
                requested_by=actor_label(request.user),
                perform=perform,
            )
        except ValidationError as exc:
            return refused(request, "; ".join(" ".join(m) for m in exc.message_dict.values()), 400)
        except JobRefused as exc:
            if not exc.holding:
                return refused(request, exc.detail, exc.status_code)
            # Held by another job: name and link it, and offer the isolation once it ends.
            context = {
                "site": site,
                "topology": data["topology"],
                "requirement": data["requirement"],
                "wait": _waiting(site.slug, data, jobs_holding(list(exc.held_devices))),
            }
            return render(request, "dashboard/isolation_refused.html", context, status=exc.status_code)
        except FleetError as exc:
            return refused(request, exc.detail, exc.status_code)
        return see_other(receipt.location)


class IsolationPlanPage(access.Page, View):
    """A plan's rounds, followed live: for an operator the live part posts `advance` (idempotent:
    it records what has happened and dispatches the round the plan has decided), for a viewer it
    re-reads the plan."""

    permission_required = access.VIEW_PROGRESS

    def get(self, request: HttpRequest, slug: str, plan_id: UUID) -> HttpResponse:
        read = isolation_plan_page(slug, plan_id)
        context = {"site": read.site, "plan": read.plan}
        if getattr(request, "htmx", False) and request.GET.get("fragment") == "plan":
            return render(request, "dashboard/partials/isolation_plan.html", context)
        return render(request, "dashboard/isolation_plan.html", context)


class IsolationAdvance(access.Page, View):
    permission_required = access.DISPATCH
    action = "move culprit isolation on"

    def post(self, request: HttpRequest, slug: str, plan_id: UUID) -> HttpResponse:
        site = site_by_slug(slug)
        problem = None
        try:
            isolation.isolation_advance(site=site, plan_id=plan_id, requested_by=actor_label(request.user))
        except FleetError as exc:
            if exc.status_code == 404:
                raise
            problem = exc.detail  # e.g. a device held by another job: the next look tries again
        if getattr(request, "htmx", False):
            read = isolation_plan_page(slug, plan_id)
            context = {"site": read.site, "plan": read.plan, "problem": problem}
            return render(request, "dashboard/partials/isolation_plan.html", context)
        return see_other(reverse("dashboard:isolation", args=[slug, plan_id]))
