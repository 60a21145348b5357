"""The dashboard's pages: each parses its input, calls its page's selector (`fleet.burnin.reads`),
which returns everything the template shows as one dataclass, and renders it; the actions call the
same services as the API (rerun preview and dispatch, job cancel). What a selector does not find
(`NotFoundError`) is the 404 page (`access.Page`).

An htmx request for a page's live part (`?fragment=…`) gets only that part, rendered by the same
view, so a page works without JavaScript and refreshes with it."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import fields
from typing import Any
from uuid import UUID

from django.core.exceptions import ValidationError
from django.http import HttpRequest, HttpResponse, StreamingHttpResponse
from django.shortcuts import redirect, render
from django.utils import timezone
from django.views import View

from fleet.burnin.reads.certificate import certificate_page
from fleet.burnin.reads.device import device_page
from fleet.burnin.reads.execution import execution_page
from fleet.burnin.reads.failures import FAILURE_ORDERS, FailureFilters, FailureRow, failures_export, failures_page
from fleet.burnin.reads.grid import GridFilters, grid_page
from fleet.burnin.reads.job import job_detail_page
from fleet.burnin.reads.metrics import MetricsPageRead, metrics_page
from fleet.burnin.reads.outcomes import job_outcomes
from fleet.burnin.reads.overview import overview_page
from fleet.burnin.reads.site import site_page
from fleet.burnin.reruns.selection import RerunSelection, device_hostnames, selection_devices
from fleet.burnin.reruns.service import DispatchOutcome, rerun_dispatch, rerun_plan_preview
from fleet.core.csvfiles import csv_writer
from fleet.core.exceptions import FleetError, NotFoundError
from fleet.dashboard import access, charts
from fleet.dashboard.forms import (
    ALL_FAILED,
    FailureFilterForm,
    GridFilterForm,
    JobsQueryForm,
    RerunForm,
    WhatIfForm,
    query_problems,
)
from fleet.fleetfile.document import FleetFileError, parse_text
from fleet.fleetfile.whatif import policy_what_if
from fleet.inventory.identity import actor_label
from fleet.inventory.models import Site
from fleet.inventory.selectors import site_by_slug
from fleet.jobs.selectors import job_page
from fleet.jobs.services import job_cancel
from fleet_rules.vocabulary import JobStatus, PlanningMode

GRID_PAGE = 100
FAILURES_PAGE = 100


def _context(read: Any) -> dict[str, Any]:
    """A page's read model as template context: each field by its name (not copied)."""
    return {f.name: getattr(read, f.name) for f in fields(read)}


def _page(request: HttpRequest, template: str, context: dict[str, Any], fragments: dict[str, str]) -> HttpResponse:
    """The whole page, or — for an htmx request naming one — only that live fragment."""
    fragment = request.GET.get("fragment")
    context = context | {"rendered_at": timezone.now()}
    if getattr(request, "htmx", False) and fragment in fragments:
        return render(request, fragments[fragment], context)
    return render(request, template, context)


class Overview(access.Page, View):
    replica_ok = True
    permission_required = access.VIEW_PROGRESS

    def get(self, request: HttpRequest) -> HttpResponse:
        return _page(
            request,
            "dashboard/overview.html",
            _context(overview_page()),
            {"sites": "dashboard/partials/overview_sites.html"},
        )


class SitePage(access.Page, View):
    replica_ok = True
    permission_required = access.VIEW_PROGRESS

    def get(self, request: HttpRequest, slug: str) -> HttpResponse:
        read = site_page(slug, with_certification=request.user.has_perm(access.VIEW_CERTIFICATES))
        return _page(
            request,
            "dashboard/site.html",
            _context(read),
            {"progress": "dashboard/partials/site_progress.html"},
        )


class GridPage(access.Page, View):
    replica_ok = True
    permission_required = access.VIEW_PROGRESS

    def get(self, request: HttpRequest, slug: str) -> HttpResponse:
        form = GridFilterForm(request.GET)
        form.is_valid()
        query = form.cleaned_data
        filters = GridFilters(
            resource_class=query.get("resource_class") or "",  # "": the site's first
            topology=query.get("topology") or None,
            verdict=query.get("verdict") or None,
            satellite=query.get("satellite") or None,
        )
        read = grid_page(slug, filters, after=query.get("after") or None, limit=GRID_PAGE)
        return _page(
            request,
            "dashboard/grid.html",
            _context(read) | {"form": form, "query": request.GET, "every_failing": ALL_FAILED},
            {"grid": "dashboard/partials/grid_table.html"},
        )


def _failure_query(request: HttpRequest) -> tuple[FailureFilterForm, FailureFilters, str, int]:
    """The failures list's filters, order and page, from the query string (the page and its CSV)."""
    form = FailureFilterForm(request.GET)
    form.is_valid()
    query = form.cleaned_data
    filters = FailureFilters(
        resource_class=query.get("resource_class") or None,
        requirement=query.get("requirement") or None,
        verdict=query.get("verdict") or None,
        satellite=query.get("satellite") or None,
    )
    return form, filters, query.get("order") or "newest", query.get("page") or 0


class FailuresPage(access.Page, View):
    replica_ok = True
    permission_required = access.VIEW_PROGRESS

    def get(self, request: HttpRequest, slug: str) -> HttpResponse:
        form, filters, order, page = _failure_query(request)
        read = failures_page(slug, filters, order=order, page=page, limit=FAILURES_PAGE)
        return render(
            request,
            "dashboard/failures.html",
            _context(read)
            | {
                "form": form,
                "order": order,
                "page": page,
                "orders": list(FAILURE_ORDERS),
                "query": request.GET,
            },
        )


FAILURES_CSV_COLUMNS = [
    "target",
    "resource_class",
    "requirement",
    "verdict",
    "rule",
    "measured",
    "comparator",
    "threshold",
    "unit",
    "margin_pct",
    "error",
    "finished_at",
    "attempts",
    "execution_id",
]


def _failure_lines(row: FailureRow) -> list[list[Any]]:
    """A failure as CSV rows: one per failing rule (numbers as numbers, so a spreadsheet sorts
    them), or one row with the error when no rule explains it (an errored run)."""
    common = [row.target, row.resource_class, row.requirement, row.verdict]
    tail = [row.finished_at.isoformat() if row.finished_at else "", row.attempts, row.execution_id or ""]
    if not row.rules:
        return [[*common, "", "", "", "", "", "", row.error, *tail]]
    return [
        [
            *common,
            rule.name,
            "" if rule.value is None else rule.value,
            rule.comparator or "",
            "" if rule.threshold is None else rule.threshold,
            row.units.get(rule.metric, ""),
            "" if rule.margin is None else round(rule.margin * 100, 1),
            row.error,
            *tail,
        ]
        for rule in row.rules
    ]


class FailuresCsv(access.Page, View):
    """The failed and errored targets as CSV, a row per failing rule: the same targets and order as
    the page, streamed a bounded chunk at a time."""

    replica_ok = True

    permission_required = access.VIEW_PROGRESS

    def get(self, request: HttpRequest, slug: str) -> StreamingHttpResponse:
        _, filters, order, _ = _failure_query(request)
        export = failures_export(slug, filters, order=order)

        def lines() -> Iterator[str]:
            out = _Line()
            writer = csv_writer(out)  # neutralises formula-looking text (fleet.core.csvfiles)
            writer.writerow(FAILURES_CSV_COLUMNS)
            yield out.take()
            for row in export.rows():
                for line in _failure_lines(row):
                    writer.writerow(line)
                yield out.take()

        response = StreamingHttpResponse(lines(), content_type="text/csv; charset=utf-8")
        response["Content-Disposition"] = f'attachment; filename="{export.site.slug}-failures.csv"'
        return response


class _Line:
    """A file-like buffer the csv writer writes one row into at a time."""

    def __init__(self) -> None:
        self.text = ""

    def write(self, text: str) -> None:
        self.text += text

    def take(self) -> str:
        text, self.text = self.text, ""
        return text


class DevicePage(access.Page, View):
    permission_required = (access.VIEW_DEVICES, access.VIEW_EXECUTIONS)

    def get(self, request: HttpRequest, slug: str, hostname: str) -> HttpResponse:
        read = device_page(slug, hostname, with_certificates=request.user.has_perm(access.VIEW_CERTIFICATES))
        return render(request, "dashboard/device.html", _context(read))


class CertificatePrint(access.Page, View):
    """A device's certificate as a page to print or save as PDF: the document, its hash, the
    signature and the key id (the JSON at the API is what verifies)."""

    permission_required = (access.VIEW_DEVICES, access.VIEW_CERTIFICATES)

    def get(self, request: HttpRequest, slug: str, hostname: str) -> HttpResponse:
        read = certificate_page(slug, hostname, serial=request.GET.get("serial"))
        return render(request, "dashboard/certificate.html", _context(read))


class ExecutionPage(access.Page, View):
    permission_required = access.VIEW_EXECUTIONS

    def get(self, request: HttpRequest, execution_id: UUID) -> HttpResponse:
        return render(request, "dashboard/execution.html", _context(execution_page(execution_id)))


class MetricsPage(access.Page, View):
    replica_ok = True
    permission_required = (access.VIEW_PROGRESS, access.VIEW_EXECUTIONS)

    def get(self, request: HttpRequest, slug: str, requirement: str) -> HttpResponse:
        read = metrics_page(slug, requirement)
        highlight = request.GET.get("highlight", "")[:255]  # a target (hostname or rack) to find on the strips
        drawn = _drawn(read, highlight)
        return render(
            request,
            "dashboard/metrics.html",
            {
                "site": read.site,
                "requirement": read.requirement,
                "drawn": drawn,
                "chart": charts,
                "highlight": highlight,
                "highlight_found": any(p.highlighted for d in drawn for p in d["placed"]),
            },
        )


def _drawn(read: MetricsPageRead, highlight: str) -> list[dict[str, Any]]:
    """Each picture on its strip (`charts`): its points placed and labelled (`charts.label`)."""
    drawn = []
    for picture in read.pictures:
        threshold = picture.rule.threshold
        numeric = threshold if isinstance(threshold, int | float) and not isinstance(threshold, bool) else None
        strip = charts.strip([p.value for p in picture.points], float(numeric) if numeric is not None else None)
        far = read.outliers.get((picture.resource_class, picture.rule.metric, picture.rule.statistic), {})
        drawn.append(
            {
                "picture": picture,
                "strip": strip,
                "placed": [
                    charts.label(point, at, far.get(point.target), highlight)
                    for point, at in zip(picture.points, strip.points, strict=True)
                ],
            }
        )
    return drawn


# --- jobs ----------------------------------------------------------------------------------------------


class JobsPage(access.Page, View):
    permission_required = access.VIEW_JOBS

    def get(self, request: HttpRequest) -> HttpResponse:
        form = JobsQueryForm(request.GET)
        if not form.is_valid():
            return render(request, "400.html", {"message": query_problems(form)}, status=400)
        query = form.cleaned_data
        statuses = query["status"]
        site = Site.objects.filter(slug=query["site"]).first() if query["site"] else None
        before = (query["before_at"], query["before_id"]) if query["before_at"] else None
        page = job_page(site_id=site.id if site else None, statuses=statuses, before=before)
        outcomes = job_outcomes(page.jobs)  # what each came to, in words (one query)
        return _page(
            request,
            "dashboard/jobs.html",
            {"page": page, "statuses": statuses, "site": site, "all_statuses": JobStatus.values, "outcomes": outcomes},
            {"jobs": "dashboard/partials/jobs_table.html"},
        )


class JobPage(access.Page, View):
    permission_required = (access.VIEW_JOBS, access.VIEW_EXECUTIONS)

    def get(self, request: HttpRequest, job_id: UUID) -> HttpResponse:
        return _page(
            request,
            "dashboard/job.html",
            _context(job_detail_page(job_id)),
            {"job": "dashboard/partials/job_detail.html"},
        )


class CancelJob(access.Page, View):
    permission_required = access.CANCEL

    def post(self, request: HttpRequest, job_id: UUID) -> HttpResponse:
        try:
            job_cancel(job_id=job_id, requested_by=actor_label(request.user))
        except NotFoundError:
            raise  # the 404 page, as for every page (access.Page)
        except FleetError as exc:
            return render(request, "dashboard/message.html", {"message": exc.detail}, status=exc.status_code)
        return redirect("dashboard:job", job_id=job_id)


# --- policy what-if ------------------------------------------------------------------------------------


class WhatIfPage(access.Page, View):
    """Upload a candidate fleet file: the targets its thresholds would flip and the certificates it
    would supersede, computed as `fleet apply --what-if` does. Nothing is written."""

    permission_required = access.DISPATCH  # the operator role
    template = "dashboard/what_if.html"

    def get(self, request: HttpRequest) -> HttpResponse:
        return render(request, self.template, {"form": WhatIfForm()})

    def post(self, request: HttpRequest) -> HttpResponse:
        form = WhatIfForm(request.POST, request.FILES)
        if not form.is_valid():
            return render(request, self.template, {"form": form}, status=400)
        try:
            text = form.cleaned_data["candidate"].read().decode("utf-8")
            document = parse_text(text)
        except UnicodeDecodeError:
            form.add_error("candidate", "The file is not UTF-8 text.")
            return render(request, self.template, {"form": form}, status=400)
        except FleetFileError as exc:
            return render(request, self.template, {"form": form, "problems": exc.problems}, status=400)
        result = policy_what_if(document=document).as_dict()
        groups: dict[tuple[str, str, str], list[dict[str, Any]]] = {}
        for flip in result["flips"]:
            groups.setdefault((flip["site"], flip["resource_class"], flip["requirement"]), []).append(flip)
        return render(
            request,
            self.template,
            {
                "form": form,
                "result": result,
                "groups": sorted(groups.items()),
                "name": form.cleaned_data["candidate"].name,
            },
        )


# --- reruns --------------------------------------------------------------------------------------------


def _selection(data: dict[str, Any]) -> RerunSelection:
    return RerunSelection(
        all_failed=data.get("select") == ALL_FAILED,
        topology=data.get("topology") or None,
        devices=tuple(data["device"]),
    )


class RerunPreview(access.Page, View):
    """Selection → the jobs a dispatch would create now and why everything else would not run."""

    permission_required = access.DISPATCH
    template = "dashboard/rerun_preview.html"

    def post(self, request: HttpRequest, slug: str) -> HttpResponse:
        site = site_by_slug(slug)
        form = RerunForm(request.POST)
        if not form.is_valid():
            return render(request, self.template, {"site": site, "form": form}, status=400)
        device_ids = selection_devices(site, _selection(form.cleaned_data))
        if not device_ids:
            form.add_error(None, "The selection holds no device.")
            return render(request, self.template, {"site": site, "form": form}, status=400)
        try:
            outcome = self.outcome(request, site, device_ids, form.cleaned_data["mode"])
        except ValidationError as exc:
            form.add_error(None, "; ".join(" ".join(m) for m in exc.message_dict.values()))
            return render(request, self.template, {"site": site, "form": form}, status=400)
        hostnames = device_hostnames(device_ids)
        return render(
            request,
            self.template,
            {
                "site": site,
                "form": form,
                "outcome": outcome,
                "device_ids": device_ids,
                "hostnames": hostnames,
                "mode": form.cleaned_data["mode"],
                "modes": PlanningMode.values,
            },
        )

    def outcome(self, request: HttpRequest, site: Site, device_ids: list[UUID], mode: PlanningMode) -> DispatchOutcome:
        return rerun_plan_preview(site=site, device_ids=device_ids, mode=mode)


class RerunDispatch(RerunPreview):
    """The same selection, dispatched through the Job path (POST with CSRF, the operator role)."""

    template = "dashboard/rerun_dispatched.html"

    def outcome(self, request: HttpRequest, site: Site, device_ids: list[UUID], mode: PlanningMode) -> DispatchOutcome:
        return rerun_dispatch(site=site, device_ids=device_ids, mode=mode, requested_by=actor_label(request.user))
