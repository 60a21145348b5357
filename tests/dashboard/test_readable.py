"""Issue 27, findings 2–5, 11, 12 and 14 at the request level: what the pages say is true and reads
as an operator reads it — attempts in the order they claim, a job's outcome in words, a blocked
rack named by its blocker, a spare marked as one, values with units and one minus sign, links to
the metric picture, and a failures CSV a spreadsheet can sort."""

from __future__ import annotations

import csv
import io
import re
from datetime import timedelta
from uuid import uuid4

from django.urls import reverse
from django.utils import timezone

from fleet.burnin.models import PolicyProgress, TestExecution
from fleet.dashboard.templatetags.dashboard import execution_href
from fleet.jobs.models import Job
from fleet.jobs.services import job_finish, jobs_claim
from fleet.lifecycle.services import device_transition
from fleet_rules.vocabulary import DeviceState, JobStatus, Mover
from tests.dashboard.conftest import (
    OPERATOR,
    RC,
    VIEWER,
    evaluate_execution,
    form_fields,
    post,
    preview_and_dispatch,
)
from tests.dashboard.test_pages import shown, text
from tests.diagnosis.test_outliers import SIBLINGS, seed


def _device(world, hostname):
    return next(d for d in world.devices if d.hostname == hostname)


def _section(page: str, start: str, end: str = "</table>") -> str:
    return page[page.index(start) :].split(end)[0]


def _words(html_text: str) -> str:
    """What a person reads of a fragment: its text without the tags."""
    return re.sub(r"<[^>]+>", "", html_text)


# --- finding 2: every attempt, newest first ------------------------------------------------------


def test_every_attempt_is_listed_newest_started_first_when_reports_arrive_out_of_order(person, burnt_in):
    device = _device(burnt_in, "a00-n01")
    now = timezone.now()
    # Reported in this order, but started in another: the later report ran first.
    early = burnt_in.report("gpu-diag", device=device, metrics={"diag_failed_tests": {"value": 0}})
    late = burnt_in.report("gpu-diag", device=device, metrics={"diag_failed_tests": {"value": 0}})
    TestExecution.objects.filter(id=early.id).update(started_at=now + timedelta(minutes=30))
    TestExecution.objects.filter(id=late.id).update(started_at=now + timedelta(minutes=10))
    page = text(person(VIEWER).get("/sites/lon-1/devices/a00-n01/"))
    attempts = _section(page, 'class="attempts"')
    shown_times = re.findall(r"<tr[^>]*><td[^>]*>(?:<time[^>]*>)?(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)", attempts)
    assert len(shown_times) >= 4, attempts
    assert shown_times == sorted(shown_times, reverse=True), shown_times


# --- finding 3: a job's outcome in words ---------------------------------------------------------


def _job_for(operator, world, hostname, *, claim=True):
    """A job of every single-node requirement of the device, dispatched, then claimed by the agent."""
    assert (
        preview_and_dispatch(operator, {"device": str(_device(world, hostname).id), "mode": "all"}).status_code == 303
    )
    if claim:
        jobs_claim(satellite=world.satellite, capacity=10)
    return Job.objects.filter(job_devices__device__hostname=hostname).get()


def _report_for_job(world, job, name, device, metrics):
    execution = world.fleet.execution(world.requirements[name], device=device, metrics=metrics, job=job)
    evaluate_execution(world, execution.id)


def test_a_job_shows_its_outcome_in_words_and_the_list_has_a_verdict_column(person, burnt_in):
    operator = person(OPERATOR)
    failed = _job_for(operator, burnt_in, "a00-n00")
    assert sorted(failed.requirement_names) == ["gpu-diag", "hbm-bandwidth"]
    device = _device(burnt_in, "a00-n00")
    _report_for_job(burnt_in, failed, "gpu-diag", device, {"diag_failed_tests": {"value": 2}})
    _report_for_job(
        burnt_in, failed, "hbm-bandwidth", device, {"hbm_bandwidth_tbps": {"value": 3, "statistics": {"min": 2.5}}}
    )
    job_finish(job_id=failed.id, outcome=JobStatus.SUCCEEDED)
    running = _job_for(operator, burnt_in, "a01-n01")
    _report_for_job(burnt_in, running, "gpu-diag", _device(burnt_in, "a01-n01"), {"diag_failed_tests": {"value": 0}})

    page = shown(operator.get(f"/jobs/{failed.id}/"))
    assert "finished — 2 of 2 tests failed" in page
    assert "succeeded" not in page
    assert "lease until" not in page  # a finished job holds no lease
    assert "running — 1 of 2 reported" in shown(operator.get(f"/jobs/{running.id}/"))

    listing = shown(operator.get("/jobs/"))
    assert "<th>verdict</th>" in listing and "lease until" not in listing.split("<tbody>")[0].split("<thead>")[1]
    failed_row = _section(listing, f'data-job="{failed.id}"', "</tr>")
    assert "✗ finished — 2 of 2 tests failed" in _words(failed_row)
    running_row = _section(listing, f'data-job="{running.id}"', "</tr>")
    assert "◷ running — 1 of 2 reported" in _words(running_row)
    assert re.search(r'class="lease">[0-9:]+<', running_row)  # an active job's lease is shown
    assert 'class="lease">—<' in failed_row
    device = shown(operator.get("/sites/lon-1/devices/a00-n00/"))
    assert "✗ finished — 2 of 2 tests failed" in _words(_section(device, '<table class="jobs">'))


def test_a_job_whose_tests_all_passed_says_so_and_a_cancelled_one_says_cancelled(person, burnt_in):
    operator = person(OPERATOR)
    # a00-n01 and a00-n02 passed everything and were accepted: an operator sends them back to burn-in
    for hostname in ("a00-n01", "a00-n02"):
        device_transition(
            device_id=_device(burnt_in, hostname).id, to=DeviceState.BURN_IN, mover=Mover.OPERATOR, actor="user:op"
        )
    passed = _job_for(operator, burnt_in, "a00-n01")
    device = _device(burnt_in, "a00-n01")
    _report_for_job(burnt_in, passed, "gpu-diag", device, {"diag_failed_tests": {"value": 0}})
    _report_for_job(
        burnt_in, passed, "hbm-bandwidth", device, {"hbm_bandwidth_tbps": {"value": 5, "statistics": {"min": 4.2}}}
    )
    job_finish(job_id=passed.id, outcome=JobStatus.SUCCEEDED)
    cancelled = _job_for(operator, burnt_in, "a00-n02")
    confirmation = operator.get(operator.get(f"/jobs/{cancelled.id}/cancel/")["Location"]).content.decode()
    cancel = form_fields(confirmation, f"/jobs/{cancelled.id}/cancel/")
    assert post(operator, f"/jobs/{cancelled.id}/cancel/", cancel).status_code == 303
    assert "finished — all 2 passed" in shown(operator.get(f"/jobs/{passed.id}/"))
    listing = shown(operator.get("/jobs/"))
    assert "✓ finished — all 2 passed" in _words(_section(listing, f'data-job="{passed.id}"', "</tr>"))
    assert "cancelled" in _section(listing, f'data-job="{cancelled.id}"', "</tr>")


# --- finding 4: a blocked rack says by whom ------------------------------------------------------


def test_a_rack_that_has_not_run_names_the_member_that_blocks_it(person, burnt_in):
    burnt_in.add_racks(1)  # rack-a02: a02-n00 fails hbm-bandwidth, the collective has not run
    viewer = person(VIEWER)
    grid = shown(viewer.get("/sites/lon-1/grid/"))
    cell = _section(grid, 'data-hostname="a02-n01"', "</tr>")
    cell = _section(cell, 'data-requirement="rack-nccl"', "</td>")
    assert "blocked: a02-n00 failed hbm-bandwidth" in cell
    device = shown(viewer.get("/sites/lon-1/devices/a02-n01/"))
    row = _section(device, 'data-requirement="rack-nccl"', "</tr>")
    assert "blocked: a02-n00 failed hbm-bandwidth" in row
    # A rack that ran is not blocked, whatever its members did since.
    ran = shown(viewer.get("/sites/lon-1/devices/a00-n01/"))
    assert "blocked:" not in _section(ran, 'data-requirement="rack-nccl"', "</tr>")


# --- finding 5: a spare is marked as one ---------------------------------------------------------


def test_a_staged_spare_is_marked_shows_no_rack_result_and_offers_no_burn_in(person, burnt_in):
    rack = burnt_in.racks[0]  # rack-a00's collective passed
    burnt_in.fleet.device(burnt_in.satellite, RC, hostname="a00-n09", state="staged", enrolled=False, topologies=[rack])
    operator = person(OPERATOR)
    page = shown(operator.get("/sites/lon-1/devices/a00-n09/"))
    assert "staged — not enrolled, not burned in" in page
    assert "not accepted yet" not in page
    assert "rerun-device" not in page and "Preview rerun" not in page
    requirements = _section(page, 'class="requirements"')
    assert "✓" not in requirements and "v-passed" not in requirements
    assert "Never run." in _section(page, 'class="attempts"')  # the rack's run was not its run
    grid = shown(operator.get("/sites/lon-1/grid/"))
    row = _section(grid, 'data-hostname="a00-n09"', "</tr>")
    assert "✓" not in row and 'name="device"' not in row
    assert "not enrolled" in row


# --- finding 11: readable values -----------------------------------------------------------------


def _hbm_evidence(browser):
    row = PolicyProgress.objects.get(device__hostname="a00-n00", requirement__name="hbm-bandwidth")
    return shown(browser.get(f"/executions/{row.execution_id}/"))


def test_the_evidence_reads_as_rules_with_units_and_one_minus_sign(person, burnt_in):
    page = _hbm_evidence(person(VIEWER))
    rule = _section(page, 'data-rule="hbm_bandwidth_tbps.min"', "</tr>")
    assert "hbm_bandwidth_tbps.min ≥ 3.6 TB/s" in rule
    assert "2.932 TB/s" in rule
    assert "−18.6 %" in rule
    assert "gte" not in page.split("Raw metrics")[0]
    assert "-18.6" not in page  # one minus sign (U+2212) everywhere, never a hyphen
    assert "hbm_bandwidth_tbps.min 2.932 TB/s is below ≥ 3.6 TB/s" in page  # the reason, in the same words
    title = page.split("<title>")[1].split("</title>")[0]
    assert "hbm-bandwidth on a00-n00" in title


def test_parameters_are_a_definition_list_with_units(person, burnt_in):
    device = _device(burnt_in, "a00-n01")
    execution = burnt_in.report("gpu-diag", device=device, metrics={"diag_failed_tests": {"value": 0}})
    TestExecution.objects.filter(id=execution.id).update(
        parameters={"duration_s": 120, "max_bytes": 17179869184, "gpus": 8}
    )
    page = shown(person(VIEWER).get(f"/executions/{execution.id}/"))
    params = _section(page, '<dl class="parameters">', "</dl>")
    assert "<dt>duration_s</dt><dd>120 s</dd>" in params
    assert "<dt>max_bytes</dt><dd>17179869184 bytes (16 GiB)</dd>" in params
    assert "<dt>gpus</dt><dd>8</dd>" in params
    assert "{'" not in page


def test_failures_read_as_rules_with_units(person, burnt_in):
    page = shown(person(VIEWER).get("/sites/lon-1/failures/?order=target"))
    assert page.count("hbm_bandwidth_tbps.min 2.932 TB/s is below ≥ 3.6 TB/s (−18.6 %)") == 2


def test_the_certificate_shows_the_measured_value_beside_each_threshold(person, burnt_in):
    page = shown(person(VIEWER).get("/sites/lon-1/devices/a00-n01/certificate/"))
    evidence = _words(_section(page, "<h2>Evidence</h2>"))
    assert "hbm_bandwidth_tbps.min ≥ 3.6 TB/s" in evidence and "measured 4.01 TB/s" in evidence
    assert "busbw_gbps ≥ 350 GB/s" in evidence and "measured 380.5 GB/s" in evidence
    assert " gte " not in evidence


def test_headings_are_in_the_domain_s_words(person, burnt_in):
    operator = person(OPERATOR)
    job = _job_for(operator, burnt_in, "a00-n00")
    page = shown(operator.get(f"/jobs/{job.id}/"))
    heading = page.split("<h1>")[1].split("</h1>")[0]
    assert "SingleNodeBurnInWorkflow" not in heading and str(job.id) not in heading
    assert "a00-n00" in heading and "burn-in" in heading.lower()


def test_k_is_named_wherever_robust_z_is_shown(person, fleet):
    seed(fleet, SIBLINGS + [320.0])
    browser = person(VIEWER)
    for url in ("/sites/lon-1/failures/", "/sites/lon-1/devices/a01-n09/", "/sites/lon-1/metrics/nccl-local/"):
        page = shown(browser.get(url))
        values = re.findall(r"robust z [−-]?\d+(?:\.\d+)?[^<]{0,30}", page)
        assert values, url
        for value in values:
            assert re.search(r"k = \d", value), (url, value)


def test_hostnames_and_slugs_do_not_break_at_their_hyphens(person, burnt_in):
    css = (
        __import__("pathlib").Path(__file__).resolve().parents[2] / "src/fleet/dashboard/static/dashboard/dashboard.css"
    ).read_text()
    assert re.search(r"\.name[^{]*\{[^}]*white-space: nowrap", css)
    operator = person(OPERATOR)
    assert preview_and_dispatch(operator, {"device": str(_device(burnt_in, "a00-n00").id)}).status_code == 303
    jobs = text(operator.get("/jobs/"))
    assert '<span class="name">lon-1</span>' in jobs and '<span class="name">a00-n00</span>' in jobs
    grid = text(operator.get("/sites/lon-1/grid/"))
    assert re.search(r'<a class="name" href="/sites/lon-1/devices/a00-n00/">a00-n00</a>', grid)


# --- finding 12: every number links to its picture -----------------------------------------------


def test_failures_device_and_evidence_link_the_metric_picture_with_the_point_highlighted(person, burnt_in):
    viewer = person(VIEWER)
    link = "/sites/lon-1/metrics/hbm-bandwidth/?highlight=a00-n00"
    failures = text(viewer.get("/sites/lon-1/failures/?order=target"))
    assert link in _section(failures, 'data-target="a00-n00"', "</tr>")
    device = text(viewer.get("/sites/lon-1/devices/a00-n00/"))
    assert link in _section(device, 'data-requirement="hbm-bandwidth"', "</tr>")
    row = PolicyProgress.objects.get(device__hostname="a00-n00", requirement__name="hbm-bandwidth")
    assert link in text(viewer.get(f"/executions/{row.execution_id}/"))
    rack = text(viewer.get("/sites/lon-1/failures/?order=target"))
    assert "/sites/lon-1/metrics/rack-nccl/?highlight=rack-a01" in _section(rack, 'data-target="rack-a01"', "</tr>")


def test_every_point_has_a_title_and_failures_and_the_highlighted_point_a_visible_label(person, burnt_in):
    page = text(person(VIEWER).get("/sites/lon-1/metrics/hbm-bandwidth/?highlight=a00-n01"))
    svg = page.split("<svg")[1].split("</svg>")[0]
    assert svg.count("<title>") == 8
    labels = re.findall(r'<text class="pt-label[^"]*"[^>]*>([^<]+)</text>', svg)
    assert {"a00-n00", "a00-n01", "a01-n00"} <= set(labels) and len(labels) == len(set(labels)), labels
    assert re.search(r'class="pt-highlight"[^>]*data-target="a00-n01"', svg)
    assert "2.932 TB/s" in svg


def test_a_highlight_with_no_point_says_so(person, burnt_in):
    page = shown(person(VIEWER).get("/sites/lon-1/metrics/hbm-bandwidth/?highlight=nobody"))
    assert "nobody has no value on this picture" in page


# --- finding 14: a CSV for spreadsheets ----------------------------------------------------------


def _csv(browser, query="order=target"):
    body = b"".join(browser.get(f"/sites/lon-1/failures.csv?{query}").streaming_content).decode()
    return list(csv.DictReader(io.StringIO(body)))


def test_the_failures_csv_has_numeric_rule_columns_and_only_failures(person, burnt_in):
    from tests.dashboard.test_attempts import fail_twice_then_pass

    fail_twice_then_pass(burnt_in, hostname="a01-n00")  # a pass after failures: not a failure row
    rows = _csv(person(VIEWER))
    assert {r["verdict"] for r in rows} <= {"failed", "errored"}
    assert [(r["target"], r["requirement"], r["verdict"]) for r in rows] == [
        ("a00-n00", "hbm-bandwidth", "failed"),
        ("rack-a01", "rack-nccl", "errored"),
    ]
    hbm = rows[0]
    assert float(hbm["measured"]) == 2.932 and float(hbm["threshold"]) == 3.6
    assert hbm["comparator"] == "gte" and hbm["unit"] == "TB/s"
    assert float(hbm["margin_pct"]) == -18.6
    assert hbm["rule"] == "hbm_bandwidth_tbps.min"
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(\+00:00|Z)", hbm["finished_at"])
    errored = rows[1]
    assert errored["error"] == "mpirun: node lost" and errored["measured"] == "" and errored["margin_pct"] == ""
    assert "passed_after_attempts" not in rows[0]


def test_a_target_failing_two_rules_is_two_csv_rows(person, burnt_in):
    from fleet.policies.models import ThresholdRule

    requirement = burnt_in.requirements["hbm-bandwidth"]
    ThresholdRule.objects.create(requirement=requirement, metric="hbm_bandwidth_tbps", comparator="gte", threshold=4)
    device = _device(burnt_in, "a00-n00")
    burnt_in.report(
        "hbm-bandwidth", device=device, metrics={"hbm_bandwidth_tbps": {"value": 3.0, "statistics": {"min": 2.8}}}
    )
    burnt_in.sweep()
    rows = [r for r in _csv(person(VIEWER)) if r["target"] == "a00-n00"]
    assert sorted((r["rule"], r["measured"], r["threshold"]) for r in rows) == [
        ("hbm_bandwidth_tbps", "3.0", "4"),
        ("hbm_bandwidth_tbps.min", "2.8", "3.6"),
    ]


def test_the_site_page_says_who_blocks_the_rack_a_waiting_device_waits_on(person, burnt_in, monkeypatch):
    monkeypatch.setattr("fleet.burnin.certificates.reads.SLOWEST", 20)  # every waiting device listed
    burnt_in.add_racks(1)
    page = shown(person(VIEWER).get("/sites/lon-1/"))
    waiting = _words(_section(page, 'data-waiting="a02-n01"', "</tr>"))
    assert "rack-nccl · not run — blocked: a02-n00 failed hbm-bandwidth" in waiting
    errored = _words(_section(page, 'data-waiting="a01-n01"', "</tr>"))
    assert "rack-nccl ! errored" in errored and "blocked" not in errored  # it ran: nothing blocks it


def test_the_unit_the_requirement_declares_wins_over_the_one_reported(person, burnt_in):
    requirement = burnt_in.requirements["hbm-bandwidth"]
    requirement.metric_units = {"hbm_bandwidth_tbps": "TiB/s"}  # as `metrics: {…: {unit: TiB/s}}` declares
    requirement.save(update_fields=["metric_units"])
    viewer = person(VIEWER)
    assert "hbm_bandwidth_tbps.min ≥ 3.6 TiB/s" in _hbm_evidence(viewer)
    failures = shown(viewer.get("/sites/lon-1/failures/?order=target"))
    assert "2.932 TiB/s is below ≥ 3.6 TiB/s" in failures
    assert {r["unit"] for r in _csv(viewer) if r["rule"]} == {"TiB/s"}
    assert "threshold 3.6 TiB/s" in shown(viewer.get("/sites/lon-1/metrics/hbm-bandwidth/"))


def test_an_execution_link_built_without_reverse_is_the_url_conf_s():
    execution_id = uuid4()
    assert execution_href(execution_id) == reverse("dashboard:execution", args=[execution_id])
    assert execution_href(str(execution_id)) == reverse("dashboard:execution", args=[execution_id])
