"""The dashboard's pages: each reads through the domain's selectors into dataclasses and renders a
template; the actions call the same services as the API (rerun preview and dispatch, job cancel).
An htmx request for a page's live part (`?fragment=…`) gets only that part, rendered by the same
view, so a page works without JavaScript and refreshes with it."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any
from uuid import UUID

from django.core.exceptions import ValidationError
from django.http import Http404, HttpRequest, HttpResponse, StreamingHttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.utils import timezone
from django.views import View

from fleet.burnin import reads
from fleet.burnin.certificates.reads import device_certificates_summary, site_certification
from fleet.burnin.diagnosis import attempts, isolation, outliers
from fleet.burnin.reruns.load import failing_devices, topology_devices
from fleet.burnin.reruns.service import DispatchOutcome, rerun_dispatch, rerun_plan_preview
from fleet.core.csvfiles import csv_writer
from fleet.core.exceptions import FleetError
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
from fleet.inventory.models import Device, Site
from fleet.inventory.selectors import sites_inventory
from fleet.jobs.selectors import active_job_counts, job_get, job_page
from fleet.jobs.services import job_cancel
from fleet_rules.vocabulary import JobStatus, PlanningMode, Verdict

GRID_PAGE = 100
FAILURES_PAGE = 100
SUSPECTS_SHOWN = 20


def _site(slug: str) -> Site:
    return get_object_or_404(Site, slug=slug)


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
        inventory = sites_inventory()
        site_ids = [s.site.id for s in inventory]
        accepted = reads.acceptance(site_ids)
        verdicts = reads.verdict_counts(site_ids)
        active = active_job_counts(site_ids)
        sites = [
            {
                "inventory": s,
                "acceptance": sum(
                    (a for (site_id, _), a in accepted.items() if site_id == s.site.id), reads.Acceptance()
                ),
                "verdicts": verdicts.get(s.site.id, {}),
                "active_jobs": active.get(s.site.id, 0),
            }
            for s in inventory
        ]
        return _page(
            request,
            "dashboard/overview.html",
            {"sites": sites},
            {"sites": "dashboard/partials/overview_sites.html"},
        )


class SitePage(access.Page, View):
    replica_ok = True
    permission_required = access.VIEW_PROGRESS

    def get(self, request: HttpRequest, slug: str) -> HttpResponse:
        site = _site(slug)
        certification = site_certification(site) if request.user.has_perm(access.VIEW_CERTIFICATES) else None
        return _page(
            request,
            "dashboard/site.html",
            {
                "site": site,
                "classes": reads.site_progress(site),
                "flaky": attempts.flaky_rates(site),
                "certification": certification,
            },
            {"progress": "dashboard/partials/site_progress.html"},
        )


class GridPage(access.Page, View):
    replica_ok = True
    permission_required = access.VIEW_PROGRESS

    def get(self, request: HttpRequest, slug: str) -> HttpResponse:
        site = _site(slug)
        form = GridFilterForm(request.GET)
        form.is_valid()
        query = form.cleaned_data
        classes = reads.site_resource_classes(site)
        resource_class = query.get("resource_class") or (classes[0] if classes else "")
        filters = reads.GridFilters(
            resource_class=resource_class,
            topology=query.get("topology") or None,
            verdict=query.get("verdict") or None,
            satellite=query.get("satellite") or None,
        )
        grid = reads.site_grid(site, filters, after=query.get("after") or None, limit=GRID_PAGE)
        return _page(
            request,
            "dashboard/grid.html",
            {
                "site": site,
                "form": form,
                "classes": classes,
                "filters": filters,
                "grid": grid,
                "outlier_marks": _outlier_marks(site, resource_class),
                "query": request.GET,
                "every_failing": ALL_FAILED,
            },
            {"grid": "dashboard/partials/grid_table.html"},
        )


def _outlier_marks(site: Site, resource_class: str) -> dict[str, dict[str, float]]:
    """hostname → requirement → the farthest robust z where the device is an outlier (3 queries)."""
    marks: dict[str, dict[str, float]] = {}
    for group in outliers.site_outlier_groups(site=site, resource_class=resource_class or None):
        for o in group.verdict.outliers:
            by_requirement = marks.setdefault(o.hostname, {})
            current = by_requirement.get(group.key.requirement)
            if current is None or abs(o.robust_z) > abs(current):
                by_requirement[group.key.requirement] = o.robust_z
    return marks


def _failure_query(request: HttpRequest) -> tuple[FailureFilterForm, reads.FailureFilters, str, int]:
    """The failures list's filters, order and page, from the query string (the page and its CSV)."""
    form = FailureFilterForm(request.GET)
    form.is_valid()
    query = form.cleaned_data
    filters = reads.FailureFilters(
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
        site = _site(slug)
        form, filters, order, page = _failure_query(request)
        rows, more = reads.site_failures(site, filters, order=order, page=page, limit=FAILURES_PAGE)
        return render(
            request,
            "dashboard/failures.html",
            {
                "site": site,
                "passed_after": _passed_after(site, filters),
                "diagnoses": isolation.site_diagnoses(site=site, limit=50),
                "suspects": outliers.site_outliers_page(
                    site=site,
                    resource_class=filters.resource_class,
                    requirement=filters.requirement,
                    limit=SUSPECTS_SHOWN,
                    cursor=None,
                ),
                "form": form,
                "rows": rows,
                "order": order,
                "page": page,
                "more": more,
                "orders": list(reads.FAILURE_ORDERS),
                "query": request.GET,
            },
        )


FAILURES_CSV_COLUMNS = [
    "target",
    "resource_class",
    "requirement",
    "verdict",
    "failing_rules",
    "error",
    "finished_at",
    "attempts",
    "execution_id",
    "passed_after_attempts",
]


def _passed_after(site: Site, filters: reads.FailureFilters) -> list[attempts.PassedAfter]:
    """Passes that followed failures or errors under the current version (not when the list is
    filtered to one failing verdict)."""
    if filters.verdict:
        return []
    rows = attempts.passes_after_failures(site)
    return [
        r
        for r in rows
        if (not filters.resource_class or r.resource_class == filters.resource_class)
        and (not filters.requirement or r.requirement == filters.requirement)
    ]


class FailuresCsv(access.Page, View):
    """The failures list as CSV: the same rows and order, streamed a bounded chunk at a time."""

    replica_ok = True

    permission_required = access.VIEW_PROGRESS

    def get(self, request: HttpRequest, slug: str) -> StreamingHttpResponse:
        site = _site(slug)
        _, filters, order, _ = _failure_query(request)

        def lines() -> Iterator[str]:
            out = _Line()
            writer = csv_writer(out)  # neutralises formula-looking text (fleet.core.csvfiles)
            writer.writerow(FAILURES_CSV_COLUMNS)
            yield out.take()
            for row in reads.iter_site_failures(site, filters, order=order):
                writer.writerow(
                    [
                        row.target,
                        row.resource_class,
                        row.requirement,
                        row.verdict,
                        "; ".join(rule.describe() for rule in row.rules),
                        row.error,
                        row.finished_at.isoformat() if row.finished_at else "",
                        row.attempts,
                        row.execution_id or "",
                        "",
                    ]
                )
                yield out.take()
            for passed in _passed_after(site, filters):
                writer.writerow(
                    [
                        passed.target,
                        passed.resource_class,
                        passed.requirement,
                        Verdict.PASSED,
                        "",
                        "",
                        "",
                        passed.summary.attempts,
                        passed.execution_id or "",
                        passed.summary.passed_after,
                    ]
                )
                yield out.take()

        response = StreamingHttpResponse(lines(), content_type="text/csv; charset=utf-8")
        response["Content-Disposition"] = f'attachment; filename="{site.slug}-failures.csv"'
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
        site = _site(slug)
        detail = reads.device_detail(site, hostname)
        certificates = (
            device_certificates_summary(detail.device.id) if request.user.has_perm(access.VIEW_CERTIFICATES) else None
        )
        return render(
            request,
            "dashboard/device.html",
            {
                "site": site,
                "detail": detail,
                "certificates": certificates,
                "attempts": attempts.device_page_attempts(detail),
                "diagnoses": isolation.site_diagnoses(site=site, device_id=detail.device.id),
                "outliers": outliers.device_outliers(
                    outliers.site_outlier_groups(site=site, resource_class=detail.device.resource_class),
                    detail.device.id,
                ),
            },
        )


class CertificatePrint(access.Page, View):
    """A device's certificate as a page to print or save as PDF: the document, its hash, the
    signature and the key id (the JSON at the API is what verifies)."""

    permission_required = (access.VIEW_DEVICES, access.VIEW_CERTIFICATES)

    def get(self, request: HttpRequest, slug: str, hostname: str) -> HttpResponse:
        site = _site(slug)
        device = get_object_or_404(Device, site=site, hostname=hostname)
        summary = device_certificates_summary(device.id)
        serial = request.GET.get("serial")
        certificate = next((c for c in summary.history if str(c.serial) == serial), None) if serial else summary.valid
        if certificate is None:
            raise Http404(f"No {'such' if serial else 'valid'} certificate of {hostname}.")
        return render(
            request,
            "dashboard/certificate.html",
            {"site": site, "device": device, "certificate": certificate, "valid": certificate == summary.valid},
        )


class ExecutionPage(access.Page, View):
    permission_required = access.VIEW_EXECUTIONS

    def get(self, request: HttpRequest, execution_id: UUID) -> HttpResponse:
        evidence = reads.execution_evidence(execution_id)
        return render(request, "dashboard/execution.html", {"evidence": evidence, "site": evidence.execution.site})


class MetricsPage(access.Page, View):
    replica_ok = True
    permission_required = (access.VIEW_PROGRESS, access.VIEW_EXECUTIONS)

    def get(self, request: HttpRequest, slug: str, requirement: str) -> HttpResponse:
        site = _site(slug)
        pictures = reads.metric_pictures(site, requirement)
        # Outliers among siblings, per (resource class, metric, statistic): hostname → robust z.
        marked: dict[tuple[str, str, str | None], dict[str, float]] = {}
        for group in outliers.site_outlier_groups(site=site, requirement=requirement):
            key = (group.key.resource_class, group.key.metric, group.key.statistic)
            marked[key] = {o.hostname: o.robust_z for o in group.verdict.outliers}
        drawn = []
        for picture in pictures:
            threshold = picture.rule.threshold
            numeric = threshold if isinstance(threshold, int | float) and not isinstance(threshold, bool) else None
            strip = charts.strip([p.value for p in picture.points], float(numeric) if numeric is not None else None)
            far = marked.get((picture.resource_class, picture.rule.metric, picture.rule.statistic), {})
            drawn.append(
                {
                    "picture": picture,
                    "strip": strip,
                    "placed": [
                        (point, at, far.get(point.target))
                        for point, at in zip(picture.points, strip.points, strict=True)
                    ],
                }
            )
        return render(
            request,
            "dashboard/metrics.html",
            {"site": site, "requirement": requirement, "drawn": drawn, "chart": charts},
        )


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
        return _page(
            request,
            "dashboard/jobs.html",
            {"page": page, "statuses": statuses, "site": site, "all_statuses": JobStatus.values},
            {"jobs": "dashboard/partials/jobs_table.html"},
        )


class JobPage(access.Page, View):
    permission_required = (access.VIEW_JOBS, access.VIEW_EXECUTIONS)

    def get(self, request: HttpRequest, job_id: UUID) -> HttpResponse:
        job = job_get(job_id)
        return _page(
            request,
            "dashboard/job.html",
            {"job": job, "executions": reads.executions_of_job(job.id), "site": job.site},
            {"job": "dashboard/partials/job_detail.html"},
        )


class CancelJob(access.Page, View):
    permission_required = access.CANCEL

    def post(self, request: HttpRequest, job_id: UUID) -> HttpResponse:
        try:
            job_cancel(job_id=job_id, requested_by=actor_label(request.user))
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


def _selection(site: Site, data: dict[str, Any]) -> list[UUID]:
    if data.get("select") == ALL_FAILED:
        return failing_devices(site)
    if data.get("topology"):
        return topology_devices(site, data["topology"])
    return list(data["device"])


class RerunPreview(access.Page, View):
    """Selection → the jobs a dispatch would create now and why everything else would not run."""

    permission_required = access.DISPATCH
    template = "dashboard/rerun_preview.html"

    def post(self, request: HttpRequest, slug: str) -> HttpResponse:
        site = _site(slug)
        form = RerunForm(request.POST)
        if not form.is_valid():
            return render(request, self.template, {"site": site, "form": form}, status=400)
        device_ids = _selection(site, form.cleaned_data)
        if not device_ids:
            form.add_error(None, "The selection holds no device.")
            return render(request, self.template, {"site": site, "form": form}, status=400)
        try:
            outcome = self.outcome(request, site, device_ids, form.cleaned_data["mode"])
        except ValidationError as exc:
            form.add_error(None, "; ".join(" ".join(m) for m in exc.message_dict.values()))
            return render(request, self.template, {"site": site, "form": form}, status=400)
        hostnames = dict(Device.objects.filter(id__in=device_ids).values_list("id", "hostname"))
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
