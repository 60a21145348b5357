"""The dashboard's pages through Django's test client on a burnt-in site: what each shows, who may
see and do what, and a constant number of queries per page whatever the fleet's size."""

from __future__ import annotations

import csv
import html
import io
import re

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from fleet.burnin.models import PolicyProgress
from fleet.dashboard.forms import ALL_FAILED
from fleet.jobs.models import Job
from tests.dashboard.conftest import OPERATOR, VIEWER, build_site, form_fields, preview, preview_and_dispatch


def text(response) -> str:
    """The page's HTML with whitespace folded (entities kept: `&lt;` stays; see `shown`)."""
    body = b"".join(response.streaming_content) if response.streaming else response.content
    return re.sub(r"\s+", " ", body.decode())


def shown(response) -> str:
    """What a person reads: the HTML with its character references turned back into characters."""
    return html.unescape(text(response))


def test_signed_out_people_are_sent_to_sign_in(client, burnt_in):
    response = client.get("/sites/lon-1/")
    assert response.status_code == 302 and response["Location"].startswith("/accounts/login/")


def test_a_person_without_a_role_is_refused_every_page(person, burnt_in):
    nobody = person([])
    for url in ["/", "/sites/lon-1/", "/sites/lon-1/grid/", "/sites/lon-1/failures/", "/jobs/"]:
        assert nobody.get(url).status_code == 403, url


def test_the_root_is_the_fleet_overview_not_swagger(person, burnt_in):
    page = text(person(VIEWER).get("/"))
    assert "Fleet overview" in page and "London 1" in page
    # 8 devices, 2 failing hbm-bandwidth, rack a01's collective errored: only rack a00's other
    # three devices passed everything.
    assert "3 of 8</strong> enrolled devices certified (37.5 %)" in page
    assert "2 failed" in page and "1 errored" in page
    assert 'role: <strong id="role">viewer</strong>' in page


def test_the_site_page_counts_each_requirement_by_verdict_with_its_unit(person, burnt_in):
    page = text(person(VIEWER).get("/sites/lon-1/"))
    hbm = page[page.index('data-requirement="hbm-bandwidth"') :][:2500]
    assert "8 devices" in hbm
    assert re.search(r"count-passed\">6 <span class=\"muted\">\(75\.0 %\)", hbm)
    assert re.search(r"count-failed\"><a [^>]*>2</a> <span class=\"muted\">\(25\.0 %\)", hbm)
    rack = page[page.index('data-requirement="rack-nccl"') :][:2500]
    assert "2 racks" in rack
    assert re.search(r"count-errored\">1 <span", rack) is None  # errored links to the failures list
    assert "verdict=errored" in rack


def test_the_grid_shows_a_symbol_in_every_cell_and_the_rack_of_multi_node_ones(person, burnt_in):
    page = text(person(VIEWER).get("/sites/lon-1/grid/"))
    row = page[page.index('data-hostname="a00-n00"') :].split("</tr>")[0]
    assert 'data-requirement="hbm-bandwidth" data-verdict="failed"' in row and "✗" in row
    assert 'data-requirement="gpu-diag" data-verdict="passed"' in row and "✓" in row
    assert 'data-requirement="rack-nccl" data-verdict="passed"' in row and "rack-a00" in row
    errored = page[page.index('data-hostname="a01-n02"') :].split("</tr>")[0]
    assert 'data-requirement="rack-nccl" data-verdict="errored"' in errored and ">!<" in errored


def test_grid_filters_and_pages_by_hostname(person, burnt_in):
    viewer = person(VIEWER)
    failed = text(viewer.get("/sites/lon-1/grid/?verdict=failed"))
    assert re.findall(r'data-hostname="([^"]+)"', failed) == ["a00-n00", "a01-n00"]
    rack = text(viewer.get("/sites/lon-1/grid/?topology=rack-a01"))
    assert re.findall(r'data-hostname="([^"]+)"', rack) == ["a01-n00", "a01-n01", "a01-n02", "a01-n03"]


def test_the_failures_list_names_each_failing_rule_with_value_threshold_and_margin(person, burnt_in):
    page = shown(person(VIEWER).get("/sites/lon-1/failures/?order=target"))
    assert page.count("hbm_bandwidth_tbps.min 2.932 TB/s is below ≥ 3.6 TB/s (−18.6 %)") == 2
    assert "mpirun: node lost" in page  # the errored collective says why
    assert re.findall(r'data-target="([^"]+)"', page) == ["a00-n00", "a01-n00", "rack-a01"]


def test_the_failures_csv_holds_the_same_rows(person, burnt_in):
    response = person(VIEWER).get("/sites/lon-1/failures.csv?order=target")
    assert response["Content-Type"].startswith("text/csv")
    rows = list(csv.DictReader(io.StringIO(b"".join(response.streaming_content).decode())))
    assert [(r["target"], r["requirement"], r["verdict"]) for r in rows] == [
        ("a00-n00", "hbm-bandwidth", "failed"),
        ("a01-n00", "hbm-bandwidth", "failed"),
        ("rack-a01", "rack-nccl", "errored"),
    ]
    assert (rows[0]["rule"], rows[0]["measured"], rows[0]["comparator"], rows[0]["threshold"]) == (
        "hbm_bandwidth_tbps.min",
        "2.932",
        "gte",
        "3.6",
    )
    assert (rows[0]["unit"], rows[0]["margin_pct"]) == ("TB/s", "-18.6")
    assert rows[2]["error"] == "mpirun: node lost"


def test_a_device_page_shows_identity_verdicts_attempts_and_the_rerun_control_only_to_operators(person, burnt_in):
    viewer_page = text(person(VIEWER).get("/sites/lon-1/devices/a00-n00/"))
    assert "◷ burn-in" in viewer_page and "not certified yet" in viewer_page
    assert 'data-requirement="hbm-bandwidth"' in viewer_page and "evidence" in viewer_page
    assert "rerun-device" not in viewer_page
    assert "rerun-device" in text(person(OPERATOR, username="op").get("/sites/lon-1/devices/a00-n00/"))
    accepted = text(person(VIEWER, username="v2").get("/sites/lon-1/devices/a00-n01/"))
    assert "✓ accepted" in accepted and "· certified" in accepted  # its certificate moved it (auto_accept)
    assert "certificate_issued" in accepted  # the lifecycle history says why


def test_the_execution_page_is_the_evidence_rule_by_rule(person, burnt_in):
    row = PolicyProgress.objects.get(device__hostname="a00-n00", requirement__name="hbm-bandwidth")
    page = text(person(VIEWER).get(f"/executions/{row.execution_id}/"))
    assert 'data-rule="hbm_bandwidth_tbps.min"' in page
    assert "hbm_bandwidth_tbps.min ≥ 3.6 TB/s" in page and "2.932 TB/s" in page and "✗ fail" in page
    assert "−18.6 %" in page
    assert "✓ current" in page  # evaluated against today's thresholds
    assert "Raw metrics" in page


def test_a_site_override_is_marked_on_the_evidence(person, burnt_in):
    from fleet.policies.models import ThresholdRule

    ThresholdRule.objects.create(
        requirement=burnt_in.requirements["hbm-bandwidth"],
        metric="hbm_bandwidth_tbps",
        statistic="min",
        comparator="gte",
        threshold=2.5,
        site=burnt_in.site,
    )
    row = PolicyProgress.objects.get(device__hostname="a00-n00", requirement__name="hbm-bandwidth")
    page = text(person(VIEWER).get(f"/executions/{row.execution_id}/"))
    assert "hbm_bandwidth_tbps.min ≥ 2.5 TB/s <strong" in page and "(site override)" in page
    assert "stale" in page  # the stored evaluation was made against the default


def test_the_metric_picture_draws_every_device_and_the_threshold(person, burnt_in):
    page = text(person(VIEWER).get("/sites/lon-1/metrics/hbm-bandwidth/"))
    assert "8 targets" in page and "threshold 3.6" in page
    assert page.count('class="pt-fail"') == 2 and page.count('class="pt-pass"') == 6
    assert page.count("/executions/") >= 8


def test_viewers_see_no_rerun_controls_and_a_forged_dispatch_is_refused(person, burnt_in):
    viewer = person(VIEWER)
    grid = text(viewer.get("/sites/lon-1/grid/"))
    assert "preview-selected" not in grid and 'name="device"' not in grid
    viewer.get("/sites/lon-1/grid/")  # sets the CSRF cookie, as a browser would
    token = viewer.cookies["csrftoken"].value
    forged = viewer.post("/sites/lon-1/reruns/dispatch/", {"select": ALL_FAILED, "csrfmiddlewaretoken": token})
    assert forged.status_code == 403
    assert Job.objects.count() == 0


def test_a_dispatch_without_csrf_is_refused(person, burnt_in):
    operator = person(OPERATOR)
    assert operator.post("/sites/lon-1/reruns/dispatch/", {"select": ALL_FAILED}).status_code == 403
    assert Job.objects.count() == 0


def _post(browser, url, data):
    browser.get("/sites/lon-1/")
    return browser.post(url, data | {"csrfmiddlewaretoken": browser.cookies["csrftoken"].value})


def test_an_operator_previews_a_rack_sees_the_skips_explained_then_dispatches(person, burnt_in):
    operator = person(OPERATOR)
    _, page = preview(operator, {"topology": "rack-a01"})
    previewed = re.sub(r"\s+", " ", page)
    assert "4 devices selected" in previewed
    assert "already_satisfied" in previewed and "it already passed under the current policy" in previewed
    assert "topology_cohort_blocked" in previewed and "runs as one cohort" in previewed
    assert Job.objects.count() == 0  # a preview creates nothing
    result = _post(operator, "/sites/lon-1/reruns/dispatch/", form_fields(page, "/sites/lon-1/reruns/dispatch/"))
    dispatched = text(operator.get(result["Location"]))
    job = Job.objects.get()
    assert job.requested_by == "user:person" and job.requirement_names == ["hbm-bandwidth"]
    assert f"/jobs/{job.id}/" in dispatched and "a01-n00" in dispatched


def test_an_empty_or_bad_selection_is_a_clear_400(person, burnt_in):
    operator = person(OPERATOR)
    assert "Select devices, a rack" in text(_post(operator, "/sites/lon-1/reruns/preview/", {}))
    bad = _post(operator, "/sites/lon-1/reruns/preview/", {"device": "not-a-uuid"})
    assert bad.status_code == 400 and "is not a device id" in text(bad)
    nowhere = operator.get(_post(operator, "/sites/lon-1/reruns/preview/", {"topology": "no-such-rack"})["Location"])
    assert nowhere.status_code == 400 and "holds no device" in text(nowhere)


def test_jobs_are_listed_and_an_operator_cancels_one(person, burnt_in):
    operator = person(OPERATOR)
    preview_and_dispatch(operator, {"select": ALL_FAILED})
    jobs = list(Job.objects.all())
    assert jobs
    listing = text(operator.get("/jobs/?site=lon-1"))
    assert all(str(j.id) in listing for j in jobs)
    detail = text(operator.get(f"/jobs/{jobs[0].id}/"))
    assert "cancel-job" in detail and "queued" in detail
    confirmation = operator.get(operator.get(f"/jobs/{jobs[0].id}/cancel/")["Location"]).content.decode()
    response = _post(operator, f"/jobs/{jobs[0].id}/cancel/", form_fields(confirmation, f"/jobs/{jobs[0].id}/cancel/"))
    assert response.status_code == 303
    jobs[0].refresh_from_db()
    assert jobs[0].status == "cancelled" and jobs[0].failure_reason == "cancelled by user:person"
    assert "cancel-job" not in text(person(VIEWER, username="v").get(f"/jobs/{jobs[0].id}/"))


def test_an_htmx_request_gets_only_the_live_fragment(person, burnt_in):
    viewer = person(VIEWER)
    fragment = text(viewer.get("/sites/lon-1/?fragment=progress", HTTP_HX_REQUEST="true"))
    assert fragment.strip().startswith('<div id="progress"') and "<html" not in fragment
    assert "<html" in text(viewer.get("/sites/lon-1/?fragment=progress"))  # not htmx: the whole page


PAGES = [
    "/",
    "/sites/lon-1/",
    "/sites/lon-1/grid/",
    "/sites/lon-1/grid/?verdict=failed&topology=rack-a00",
    "/sites/lon-1/grid/?resource_class=gpu.h200.8x&satellite=sat-a",
    "/sites/lon-1/grid/?after=a00-n01",  # a later page (not empty at either size)
    "/sites/lon-1/failures/",
    "/sites/lon-1/failures/?resource_class=gpu.h200.8x&requirement=hbm-bandwidth&verdict=failed&satellite=sat-a",
    "/sites/lon-1/failures/?order=target&page=1",  # a later page
    "/sites/lon-1/devices/a00-n00/",
    "/sites/lon-1/devices/a00-n01/",
    "/sites/lon-1/devices/a00-n01/certificate/",
    "/sites/lon-1/metrics/hbm-bandwidth/",
    "/sites/lon-1/metrics/hbm-bandwidth/?highlight=a00-n00",
    "/jobs/",
    "/jobs/?site=lon-1&status=queued",
]


@pytest.mark.parametrize("url", PAGES)
def test_each_page_costs_the_same_queries_at_two_fleet_sizes(person, fleet, url):
    world = build_site(fleet, racks=1)
    browser = person(OPERATOR)
    counts = []
    for grow in (0, 3):
        world.add_racks(grow)
        preview_and_dispatch(browser, {"select": ALL_FAILED})  # jobs to list, more each time
        browser.get(url)  # warm: the session, permissions, content types
        with CaptureQueriesContext(connection) as queries:
            assert browser.get(url).status_code == 200
        counts.append(len(queries))
    assert len(world.devices) == 16 and Job.objects.count() >= 4
    assert counts[0] == counts[1], counts


def test_what_does_not_exist_is_the_404_page(person, burnt_in):
    viewer = person(VIEWER)
    assert viewer.get("/sites/lon-1/devices/no-such-host/").status_code == 404
    assert viewer.get("/sites/no-such-site/").status_code == 404
    assert viewer.get("/executions/00000000-0000-4000-8000-000000000000/").status_code == 404
    assert viewer.get("/sites/lon-1/metrics/no-such-requirement/").status_code == 404
    assert "404 — not found" in text(viewer.get("/jobs/00000000-0000-4000-8000-000000000000/"))


def test_the_grid_offers_operators_every_failing_device_and_a_rack_as_selections(person, burnt_in):
    page = text(person(OPERATOR).get("/sites/lon-1/grid/"))
    assert f'name="select" value="{ALL_FAILED}"' in page
    assert '<option value="rack-a01">rack rack-a01</option>' in page
    assert page.count('name="device"') == 8


def test_the_standard_roles_open_the_dashboard_as_documented(client, user_factory, burnt_in):
    """The viewer and operator groups (fleet.access, kept in sync after every migrate) carry what
    the dashboard asks for: a viewer reads every page, an operator also dispatches."""
    from django.contrib.auth.models import Group
    from django.test import Client

    def member(role):
        user = user_factory(username=f"a-{role}")
        user.groups.add(Group.objects.get(name=role))
        browser = Client(enforce_csrf_checks=True)
        browser.force_login(user)
        return browser

    viewer, operator = member("viewer"), member("operator")
    row = PolicyProgress.objects.filter(execution__isnull=False).first()
    for url in [*PAGES, f"/executions/{row.execution_id}/", "/sites/lon-1/failures.csv"]:
        assert viewer.get(url).status_code == 200, url
    assert 'role: <strong id="role">viewer</strong>' in text(viewer.get("/"))
    assert 'role: <strong id="role">operator</strong>' in text(operator.get("/"))
    assert _post(viewer, "/sites/lon-1/reruns/preview/", {"select": ALL_FAILED}).status_code == 403
    assert preview_and_dispatch(operator, {"select": ALL_FAILED}).status_code == 303
    assert Group.objects.get(name="viewer").permissions.filter(codename="view_reconcilesweep").exists()
