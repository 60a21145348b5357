"""The dashboard's pages: each parses its input, calls its page's selector (`fleet.burnin.reads`),
which returns everything the template shows as one dataclass, and renders it; the actions call the
same services as the API (the state-changing ones, Post/Redirect/Get with a token, are in
`fleet.dashboard.actions`). What a selector does not find
(`NotFoundError`) is the 404 page (`access.Page`).

An htmx request for a page's live part (`?fragment=…`) gets only that part, rendered by the same
view, so a page works without JavaScript and refreshes with it."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import fields
from functools import partial
from typing import Any
from uuid import UUID

from django import forms
from django.http import HttpRequest, HttpResponse, StreamingHttpResponse
from django.shortcuts import render
from django.utils import timezone
from django.views import View

from fleet.autopilot.selectors import site_autopilot
from fleet.burnin.reads.certificate import certificate_page
from fleet.burnin.reads.device import device_page
from fleet.burnin.reads.execution import execution_page
from fleet.burnin.reads.failures import (
    FAILURE_ORDERS,
    NOT_PASSING,
    FailureFilters,
    FailureRow,
    failures_export,
    failures_page,
)
from fleet.burnin.reads.filters import scoped_rack_named, scoped_racks, site_filter_values
from fleet.burnin.reads.grid import GridFilters, grid_page
from fleet.burnin.reads.job import job_detail_page
from fleet.burnin.reads.metrics import MetricsPageRead, metrics_page
from fleet.burnin.reads.outcomes import job_outcomes
from fleet.burnin.reads.overview import overview_page
from fleet.burnin.reads.site import site_page
from fleet.core.csvfiles import csv_writer
from fleet.dashboard import access, charts
from fleet.dashboard.forms import (
    ALL_FAILED,
    FailureFilterForm,
    GridFilterForm,
    JobsQueryForm,
    WhatIfForm,
    query_problems,
)
from fleet.fleetfile.document import FleetFileError, parse_text
from fleet.fleetfile.whatif import policy_what_if
from fleet.inventory.selectors import site_list
from fleet.jobs.selectors import job_page
from fleet_rules.vocabulary import JobStatus, Verdict

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
            _context(read) | {"autopilot": site_autopilot(read.site)},
            {"progress": "dashboard/partials/site_progress.html"},
        )


def _bad_query(request: HttpRequest, form: forms.Form) -> HttpResponse:
    """A query parameter the page's form refused: the 400 page naming each (an unknown value with
    the known ones listed), never the page's results for a filter that matched nothing."""
    return render(request, "400.html", {"message": query_problems(form), "without_query": request.path}, status=400)


class GridPage(access.Page, View):
    replica_ok = True
    permission_required = access.VIEW_PROGRESS

    def get(self, request: HttpRequest, slug: str) -> HttpResponse:
        known = site_filter_values(slug, with_troubled_class=True)
        form = GridFilterForm(
            request.GET,
            known=known,
            racks=partial(scoped_racks, known.site),
            rack_named=partial(scoped_rack_named, known.site),
        )
        if not form.is_valid():
            return _bad_query(request, form)
        query = form.cleaned_data
        filters = GridFilters(
            resource_class=query["resource_class"],  # the class in trouble when none is named
            topology=query["topology"] or None,
            verdict=query["verdict"] or None,
            satellite=query["satellite"] or None,
        )
        read = grid_page(
            known, filters, racks=form.racks, more_racks=form.more_racks, after=query["after"] or None, limit=GRID_PAGE
        )
        return _page(
            request,
            "dashboard/grid.html",
            _context(read)
            | {
                "satellites": known.satellites,
                "verdicts": Verdict.values,
                "query": request.GET,
                "every_failing": ALL_FAILED,
            },
            {"grid": "dashboard/partials/grid_table.html"},
        )


def _failure_query(request: HttpRequest, slug: str) -> FailureFilterForm:
    """The failures list's filters, order and page, from the query string (the page and its CSV),
    checked against what the site holds."""
    return FailureFilterForm(request.GET, known=site_filter_values(slug))


def _failure_filters(form: FailureFilterForm) -> FailureFilters:
    query = form.cleaned_data
    return FailureFilters(
        resource_class=query["resource_class"] or None,
        requirement=query["requirement"] or None,
        verdict=query["verdict"] or None,
        satellite=query["satellite"] or None,
    )


class FailuresPage(access.Page, View):
    replica_ok = True
    permission_required = access.VIEW_PROGRESS

    def get(self, request: HttpRequest, slug: str) -> HttpResponse:
        form = _failure_query(request, slug)
        if not form.is_valid():
            return _bad_query(request, form)
        filters = _failure_filters(form)
        order, page = form.cleaned_data["order"] or "newest", form.cleaned_data["page"] or 0
        read = failures_page(slug, filters, order=order, page=page, limit=FAILURES_PAGE)
        known = form.known_values
        return render(
            request,
            "dashboard/failures.html",
            _context(read)
            | {
                "filters": filters,
                "classes": known.resource_classes,
                "requirements": known.requirement_names(filters.resource_class),
                "satellites": known.satellites,
                "verdicts": [str(v) for v in NOT_PASSING],
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

    def get(self, request: HttpRequest, slug: str) -> HttpResponse | StreamingHttpResponse:
        form = _failure_query(request, slug)
        if not form.is_valid():
            return _bad_query(request, form)
        export = failures_export(slug, _failure_filters(form), order=form.cleaned_data["order"] or "newest")

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
        read = device_page(
            slug,
            hostname,
            with_certificates=request.user.has_perm(access.VIEW_CERTIFICATES),
            with_fingerprints=request.user.has_perm(access.VIEW_FINGERPRINTS),
        )
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
        metric = request.GET.get("metric", "")[:255]  # the metric a failure's link came for: its picture first
        drawn = _drawn(read, highlight, metric)
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


def _drawn(read: MetricsPageRead, highlight: str, metric: str = "") -> list[dict[str, Any]]:
    """Each picture on its strip (`charts`): its points placed and labelled (`charts.label`). The
    pictures holding the highlighted target come first, the asked-for metric's before the rest."""
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
                "anchor": charts.metric_picture_anchor(picture.resource_class, _metric_name(picture.rule)),
                "name": _metric_name(picture.rule),
            }
        )

    def first(d: dict[str, Any]) -> tuple[bool, bool]:
        return (not any(p.highlighted for p in d["placed"]), d["name"] != metric)

    return sorted(drawn, key=first) if highlight or metric else drawn


def _metric_name(rule: Any) -> str:
    return f"{rule.metric}.{rule.statistic}" if rule.statistic else rule.metric


# --- jobs ----------------------------------------------------------------------------------------------


class JobsPage(access.Page, View):
    permission_required = access.VIEW_JOBS

    def get(self, request: HttpRequest) -> HttpResponse:
        sites = {s.slug: s for s in site_list()}
        form = JobsQueryForm(request.GET, sites=list(sites))
        if not form.is_valid():
            return _bad_query(request, form)
        query = form.cleaned_data
        statuses = query["status"]
        site = sites[query["site"]] if query["site"] else None
        before = (query["before_at"], query["before_id"]) if query["before_at"] else None
        page = job_page(site_id=site.id if site else None, statuses=statuses, before=before)
        outcomes = job_outcomes(page.jobs)  # what each came to, in words (one query)
        return _page(
            request,
            "dashboard/jobs.html",
            {
                "page": page,
                "statuses": statuses,
                "site": site,
                "sites": sites.values(),
                "all_statuses": JobStatus.values,
                "outcomes": outcomes,
            },
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


# --- policy what-if ------------------------------------------------------------------------------------


class WhatIfPage(access.Page, View):
    """Upload a candidate fleet file: the targets its thresholds would flip and the certificates it
    would supersede, computed as `fleet apply --what-if` does. Nothing is written."""

    permission_required = access.DISPATCH  # the operator role
    action = "try a candidate fleet file on what-if (it writes nothing)"
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
