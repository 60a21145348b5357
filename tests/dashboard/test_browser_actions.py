"""State-changing actions in a real browser (the harness of test_browser.py): Post/Redirect/Get,
reload and back after a dispatch, the confirmations of cancel and of a dispatch to several
devices, and culprit isolation started and followed from the dashboard. Issue 27, findings 8, 12."""

from __future__ import annotations

import re

import pytest
from django.conf import global_settings

from fleet.burnin.models import DeviceDiagnosis, IsolationPlan
from fleet.burnin.reruns.service import rerun_dispatch
from fleet.inventory.models import Device
from fleet.jobs.models import Job
from fleet.jobs.services import job_finish
from fleet_rules.vocabulary import JobStatus, PlanningMode
from tests.dashboard import test_browser as harness
from tests.dashboard.conftest import OPERATOR
from tests.dashboard.test_browser import LIVE_WAIT_MS, Visit, _person
from tests.diagnosis.test_isolation import Rack
from tests.helpers import fleet_env, start_server, stop

#: The harness's fixtures (a browser for the module, the burnt-in site served, a signed-in tab).
chromium, site_served, tab = harness.chromium, harness.site_served, harness.tab


def test_a_reload_of_the_dispatch_result_creates_nothing_and_back_shows_the_preview_as_used(tab):
    visit, world = tab
    page = visit.page
    visit.sign_in("operator")
    visit.go("/sites/lon-1/grid/", "grid")
    page.select_option('select[name="topology"][aria-label="rack to rerun"]', "rack-a01")
    page.click("#select-rack")
    page.wait_for_url(re.compile(r"/reruns/preview/[0-9a-f-]{36}/$"))
    preview_url = page.url
    visit.shoot("preview")
    assert "1 job to 1 device: a01-n00" in page.inner_text("main")
    page.click("#dispatch")
    page.wait_for_url(re.compile(r"/sites/lon-1/reruns/[0-9a-f-]{36}/$"))
    visit.shoot("result")
    job = Job.objects.get()
    assert page.locator("a.created-job").inner_text() == str(job.id)
    assert "No job was created" not in page.inner_text("main")

    job_finish(job_id=job.id, outcome=JobStatus.SUCCEEDED)  # a resubmitted POST would now plan a01-n00 again
    page.reload()
    visit.shoot("result-reloaded")
    assert Job.objects.count() == 1
    assert page.locator("a.created-job").inner_text() == str(job.id)

    page.go_back()
    page.wait_for_url(preview_url)
    visit.shoot("preview-after-back")
    assert page.locator("#dispatch").count() == 0
    assert "already dispatched" in page.inner_text("main")
    page.click("#preview-result")
    page.wait_for_url(re.compile(r"/sites/lon-1/reruns/[0-9a-f-]{36}/$"))
    assert Job.objects.count() == 1


def test_a_dispatch_to_several_devices_asks_for_confirmation_naming_them(tab):
    visit, world = tab
    page = visit.page
    visit.sign_in("operator")
    visit.go("/sites/lon-1/grid/", "grid")
    page.click("#select-all-failed")
    page.wait_for_url(re.compile(r"/reruns/preview/[0-9a-f-]{36}/$"))
    visit.shoot("preview")
    confirm = page.locator('label[for="confirm-dispatch"]').inner_text()
    assert "I will dispatch 2 jobs to 2 devices: a00-n00, a01-n00" in confirm
    page.click("#dispatch")  # not ticked: the browser does not send the form
    page.wait_for_timeout(500)
    assert "/reruns/preview/" in page.url and Job.objects.count() == 0
    page.check("#confirm-dispatch")
    page.click("#dispatch")
    page.wait_for_url(re.compile(r"/sites/lon-1/reruns/[0-9a-f-]{36}/$"))
    visit.shoot("result")
    assert Job.objects.count() == 2 and page.locator("a.created-job").count() == 2


def test_cancelling_a_job_asks_for_confirmation_and_a_reload_changes_nothing(tab):
    visit, world = tab
    page = visit.page
    a00 = Device.objects.get(hostname="a00-n00")
    rerun_dispatch(site=world.site, device_ids=[a00.id], mode=PlanningMode.NON_PASSING, requested_by="t")
    job = Job.objects.get()
    visit.sign_in("operator")
    visit.go(f"/jobs/{job.id}/", "job")
    page.click("#cancel-job")
    page.wait_for_url(re.compile(rf"/jobs/{job.id}/cancel/\?token="))
    visit.shoot("confirm")
    assert f"I will cancel job {job.id}" in page.locator('label[for="confirm"]').inner_text()
    job.refresh_from_db()
    assert job.status == JobStatus.QUEUED  # the click asked; it did not cancel
    page.click("#confirm-cancel")  # not ticked: nothing sent
    page.wait_for_timeout(500)
    job.refresh_from_db()
    assert job.status == JobStatus.QUEUED
    page.check("#confirm")
    page.click("#confirm-cancel")
    page.wait_for_url(re.compile(rf"/jobs/{job.id}/$"))
    visit.shoot("cancelled")
    assert "cancelled" in page.inner_text("#job-status")
    page.reload()
    assert "cancelled" in page.inner_text("#job-status") and "409" not in page.inner_text("main")
    page.go_back()
    visit.shoot("confirm-after-back")
    assert page.locator("#confirm-cancel").count() == 0 and "already used" in page.inner_text("main")


@pytest.fixture
def rack_served(transactional_db, fleet, settings):
    """A rack of 8 whose collective failed because of a01-n05, committed, and a real server."""
    settings.PASSWORD_HASHERS = global_settings.PASSWORD_HASHERS
    rack = Rack(fleet)
    _person("operator", OPERATOR)
    server, base = start_server(fleet_env(), workers=1)
    try:
        yield rack, base
    finally:
        output = stop(server)
        assert "Traceback" not in output, output[-4000:]


def test_an_operator_isolates_a_failed_rack_from_the_dashboard_and_follows_its_rounds(chromium, rack_served):
    rack, base = rack_served
    context = chromium.new_context(viewport={"width": 1400, "height": 1000})
    page = context.new_page()
    page.set_default_timeout(15_000)
    visit = Visit(page, base, "isolation-from-the-dashboard")
    try:
        visit.sign_in("operator")
        visit.go("/sites/lon-1/failures/", "failures")
        page.click('tr[data-target="rack-a01"] a.isolate')
        page.wait_for_url(re.compile(r"/isolation/preview/\?.*token="))
        visit.shoot("preview")
        text = page.inner_text("main")
        assert "cohort of 8" in text and "at most 4 rounds" in text
        page.check("#confirm")
        page.click("#start-isolation")
        page.wait_for_url(re.compile(r"/sites/lon-1/isolation/[0-9a-f-]{36}/$"))
        visit.shoot("round-1")
        plan = IsolationPlan.objects.get()
        assert "round 1" in page.inner_text("#plan")
        page.evaluate("window.notReloaded = true")
        for number in (2, 3):
            rack.run_round()  # the agent runs the round's collectives; the page moves the plan on
            page.wait_for_function(
                f"() => document.querySelector('#plan').innerText.includes('round {number}')", timeout=LIVE_WAIT_MS
            )
            visit.shoot(f"round-{number}")
        rack.run_round()
        page.wait_for_function(
            "() => document.querySelector('#plan').innerText.includes('culprit: a01-n05')", timeout=LIVE_WAIT_MS
        )
        visit.shoot("culprit")
        assert page.evaluate("window.notReloaded") is True
        plan.refresh_from_db()
        assert plan.status == "found"
        assert DeviceDiagnosis.objects.get().device.hostname == "a01-n05"
    finally:
        context.close()
