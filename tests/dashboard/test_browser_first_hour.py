"""A new operator's first hour in a real browser (issue 43, items 2, 3, 4, 9 and 11; the harness of
test_browser.py): live pages that meet an ended session say so and come back; a failing target
stays on the failures list while its rerun runs; the isolation refusal names and links the job
that holds the devices and offers the isolation once it ends; every page speaks the dashboard's
words; the device page says why a requirement failed and opens the fleet's picture on its metric."""

from __future__ import annotations

import re

from django.contrib.sessions.models import Session

from fleet.burnin.reruns.service import rerun_dispatch
from fleet.inventory.models import Device
from fleet.jobs.services import JobSpec, job_cancel, job_create, job_finish, jobs_claim
from fleet_rules.vocabulary import JobStatus, PlanningMode, WorkflowName
from tests.dashboard import test_browser as harness
from tests.dashboard import test_browser_actions as actions
from tests.dashboard.conftest import RC
from tests.dashboard.test_browser import LIVE_WAIT_MS, Visit

#: The harness's fixtures (a browser for the module, the burnt-in site served, a signed-in tab),
#: and the failed rack of eight served for isolation.
chromium, site_served, tab, rack_served = harness.chromium, harness.site_served, harness.tab, actions.rack_served


def _end_the_session() -> None:
    """What an expired session is to the server: no session row (the browser still sends its cookie)."""
    Session.objects.all().delete()


# --- item 2: live pages and an ended session ---------------------------------------------------------


def test_a_live_page_whose_session_ends_shows_a_banner_and_signs_in_back_to_the_same_page(tab):
    visit, _ = tab
    page = visit.page
    visit.sign_in("operator")
    assert page.locator("#session-ended").is_hidden()

    _end_the_session()
    page.wait_for_selector("#session-ended", state="visible", timeout=LIVE_WAIT_MS)
    visit.shoot("overview-session-ended")

    # The page is still the page: one header, its sites, no sign-in form swapped into it.
    assert page.locator("header.top").count() == 1
    assert page.locator("#sites [data-site='lon-1']").count() == 1
    assert page.locator("main form #id_username").count() == 0
    assert "session ended" in page.inner_text("#session-ended")
    page.click("#sign-in-again")
    page.wait_for_url(re.compile(r"/accounts/login/\?next=%2F$"))
    page.fill("#id_username", "operator")
    page.fill("#id_password", harness.PASSWORD)
    page.click("button[type=submit]")
    page.wait_for_url(visit.base + "/")  # the overview, not its live part's `?fragment=sites`
    assert page.locator("#sites").count() == 1


def test_the_grid_keeps_its_table_when_the_session_ends_and_a_ticked_selection_survives_signing_in(tab):
    visit, world = tab
    page = visit.page
    visit.sign_in("operator")
    visit.go(f"/sites/lon-1/grid/?resource_class={RC}", "grid")
    failing = world.devices[0]
    page.check(f"#pick-{failing.id}")

    _end_the_session()
    page.wait_for_selector("#session-ended", state="visible", timeout=LIVE_WAIT_MS)
    assert page.locator("#grid tr[data-hostname]").count() == len(world.devices)  # the table is still there
    visit.shoot("grid-session-ended")

    page.click("#preview-selected")  # posted after the session ended
    page.wait_for_url(re.compile(r"/accounts/login/\?next="))
    page.fill("#id_username", "operator")
    page.fill("#id_password", harness.PASSWORD)
    page.click("button[type=submit]")
    page.wait_for_url(re.compile(r"/sites/lon-1/reruns/preview/[0-9a-f-]{36}/$"))
    visit.shoot("preview-after-sign-in")
    assert failing.hostname in page.inner_text("main")  # the ticked device, not "Select devices…"


# --- item 3: failing while the rerun runs -----------------------------------------------------------


def test_a_failing_target_stays_on_the_failures_list_while_its_rerun_runs(tab):
    visit, world = tab
    page = visit.page
    failing = Device.objects.get(hostname=world.failing[0])
    world.fleet.execution(world.requirements["hbm-bandwidth"], device=failing, status="running", metrics={})
    world.sweep()
    visit.sign_in("operator")

    visit.go("/sites/lon-1/failures/", "failures-rerun-running")

    row = page.locator(f'tr[data-target="{failing.hostname}"][data-requirement="hbm-bandwidth"]')
    assert row.count() == 1, page.inner_text("main")[:2000]
    text = row.inner_text()
    assert "✗ failed" in text and "rerun in progress" in text
    assert "hbm_bandwidth_tbps.min 2.932 TB/s is below ≥ 3.6 TB/s" in text  # the failed attempt's reasons
    assert "Nothing failed" not in page.inner_text("main")


# --- item 4: the isolation refusal -----------------------------------------------------------------


def test_the_isolation_refusal_names_and_links_the_holding_job_and_offers_isolation_once_it_ends(chromium, rack_served):
    rack, base = rack_served
    context = chromium.new_context(viewport={"width": 1400, "height": 1000})
    page = context.new_page()
    page.set_default_timeout(15_000)
    visit = Visit(page, base, "isolation-refused-held")
    try:
        visit.sign_in("operator")
        visit.go("/sites/lon-1/failures/", "failures")
        page.click('tr[data-target="rack-a01"] a.isolate')
        page.wait_for_url(re.compile(r"/isolation/preview/\?.*token="))
        page.check("#confirm")
        # Meanwhile someone reruns a device of the rack: a job holds it.
        holder = job_create(
            spec=JobSpec(rack.site.id, rack.satellite.id, WorkflowName.SINGLE_NODE, (rack.devices[0].id,)),
            requested_by="someone else",
        )
        page.click("#start-isolation")
        visit.shoot("refused")

        assert "isolation did not start" in page.inner_text("main")
        link = page.locator(f'#isolation-wait a.holding-job[href="/jobs/{holder.id}/"]')
        assert link.count() == 1
        assert rack.devices[0].hostname in page.inner_text("#isolation-wait")
        assert "once it ends" in page.inner_text("#isolation-wait")

        # When the job ends, the panel offers the isolation, and it starts.
        job_cancel(job_id=holder.id, requested_by="someone else")
        page.wait_for_selector("#isolate-now", timeout=LIVE_WAIT_MS)
        visit.shoot("offered")
        page.click("#isolate-now")
        page.wait_for_url(re.compile(r"/isolation/preview/\?.*token="))
        page.check("#confirm")
        page.click("#start-isolation")
        page.wait_for_url(re.compile(r"/sites/lon-1/isolation/[0-9a-f-]{36}/$"))
        assert "round 1" in page.inner_text("#plan")
    finally:
        context.close()


# --- item 9: the dashboard's words ----------------------------------------------------------------


def test_every_page_speaks_the_dashboard_s_words(tab):
    visit, world = tab
    page = visit.page
    visit.sign_in("operator")

    # A mistyped site: the 404 lists the sites there are, and one click gets there.
    visit.go("/sites/lon1/", "unknown-site")
    assert "No site 'lon1'" in page.inner_text("main")
    page.click("a.known-site")
    page.wait_for_url(visit.base + "/sites/lon-1/")

    # The grid's 400 lists the parameters a person may type, not htmx's own.
    visit.go("/sites/lon-1/grid/?bogus=1", "grid-400")
    refusal = page.inner_text("main")
    assert "unknown parameter 'bogus'" in refusal and "resource_class" in refusal
    assert "fragment" not in refusal

    # A job that ended: its cancel page names its workflow in words and says what it came to, as the jobs list does.
    job = rerun_dispatch(
        site=world.site, device_ids=[world.devices[0].id], mode=PlanningMode.ALL, requested_by="someone"
    ).created_jobs[0]
    jobs_claim(satellite=world.satellite, capacity=1)
    job_finish(job_id=job.job_id, outcome=JobStatus.SUCCEEDED)
    visit.go(f"/jobs/{job.job_id}/cancel/", "cancel-ended")
    heading = page.inner_text("h1")
    assert heading.startswith("Cancel Single-node burn-in job") and "SingleNodeBurnInWorkflow" not in heading
    ended = page.inner_text("#already-ended")
    visit.go("/jobs/", "jobs")
    listed = page.inner_text(f'tr:has(a[href="/jobs/{job.job_id}/"]) td.status')
    assert listed.split("(")[0].strip() in ended, (listed, ended)
    assert "(succeeded)" not in ended

    # A stale repair: the state in words, and the way back is the repair form (not the rerun preview's).
    device = world.devices[1]
    Device.objects.filter(id=device.id).update(state="needs_repair")
    visit.go(f"/sites/lon-1/devices/{device.hostname}/repair/", "repair-form")
    Device.objects.filter(id=device.id).update(state="accepted")  # someone else's repair went through
    page.fill("#summary", "reseated GPU 2")
    page.check("#confirm")
    page.click("#record-repair")
    visit.shoot("repair-stale")
    refused = page.inner_text("#refused")
    assert f"{device.hostname} is ✓ accepted now" in refused and "✗ needs repair" in refused
    assert "needs_repair" not in refused and "burn_in" not in refused
    assert page.inner_text("#again").startswith("Open the repair form again")

    # The what-if page: the failures list's words (units, ≥), targets linked.
    visit.go("/what-if/", "what-if")
    page.set_input_files(
        "input[name=candidate]", files=[{"name": "c.yaml", "mimeType": "text/yaml", "buffer": CANDIDATE}]
    )
    page.click("#what-if-run")
    page.wait_for_selector("#what-if-result")
    visit.shoot("what-if-result")
    flipped = page.locator('#what-if-result tr[data-flip="a00-n01"]')
    assert "hbm_bandwidth_tbps.min 4.01 TB/s is below ≥ 4.02 TB/s (−0.2 %)" in flipped.inner_text()
    assert " gte " not in page.inner_text("#what-if-result")
    assert flipped.locator('a[href="/sites/lon-1/devices/a00-n01/"]').count() == 1


CANDIDATE = b"""
policies:
  - resource_class: gpu.h200.8x
    requirements:
      - name: hbm-bandwidth
        gate: burn-in
        test: nvbandwidth
        thresholds: [{metric: hbm_bandwidth_tbps, statistic: min, comparator: gte, threshold: 4.02}]
"""


# --- item 11: the device page ---------------------------------------------------------------------

NVBW_RULES = [
    {"metric": "h2d_gbps", "statistic": "min", "comparator": "gte", "threshold": 48},
    {"metric": "d2h_gbps", "statistic": "min", "comparator": "gte", "threshold": 48},
    {"metric": "d2d_gbps", "statistic": "min", "comparator": "gte", "threshold": 335},
]


def _bandwidth(d2d: float) -> dict:
    return {
        name: {"value": value, "unit": "GB/s", "statistics": {"min": value}}
        for name, value in (("h2d_gbps", 55.3), ("d2h_gbps", 55.2), ("d2d_gbps", d2d))
    }


def test_the_device_page_says_why_a_requirement_failed_and_opens_the_picture_on_its_metric(tab):
    visit, world = tab
    page = visit.page
    # A requirement of three metrics whose third fails on one device.
    policy = world.requirements["gpu-diag"].policy
    world.requirements["nvbandwidth"] = world.fleet.requirement(
        policy, "nvbandwidth", test="nvbw", thresholds=NVBW_RULES
    )
    sick = world.devices[2]
    for device in world.devices:
        world.report("nvbandwidth", device=device, metrics=_bandwidth(161.26 if device == sick else 396.5))
    world.sweep()
    visit.sign_in("operator")

    visit.go(f"/sites/lon-1/devices/{sick.hostname}/", "device")

    row = page.locator('table.requirements tr[data-requirement="nvbandwidth"]')
    assert "d2d_gbps.min 161.26 GB/s is below ≥ 335 GB/s (−51.9 %)" in row.inner_text()
    headings = [h.strip() for h in page.locator("h2").all_inner_texts()]
    assert headings.index("Requirements") < headings.index("Lifecycle"), headings  # before the long sections
    row.locator("a.metric-link").click()
    page.wait_for_url(
        re.compile(r"/metrics/nvbandwidth/\?highlight=.*metric=d2d_gbps\.min#m-gpu\.h200\.8x-d2d_gbps\.min$")
    )
    visit.shoot("picture")
    first = page.locator("section.metric").first
    assert first.get_attribute("data-metric") == "d2d_gbps.min"
    assert first.locator(f'[data-target="{sick.hostname}"] circle.pt-highlight').count() == 1
    top = page.evaluate("document.getElementById('m-gpu.h200.8x-d2d_gbps.min').getBoundingClientRect().top")
    assert -20 < top < 1000  # in view: the page opened on it
