"""The dashboard in a real browser (Playwright driving Debian's Chromium) against a real
`fleet serve`: what an operator does all day, end to end. Screenshots of every page visited go
to test-artifacts/ (ignored by git).

Chromium is installed with apt when missing and the tests run as root; without it the tests
fail under CI=true and skip loudly elsewhere (tests/support/system.py)."""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from django.conf import global_settings
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission
from django.utils import timezone

from fleet.burnin.executions import ExecutionReport, execution_report
from fleet.jobs.models import Job
from tests.dashboard.conftest import OPERATOR, VIEWER, build_site, evaluate_execution
from tests.helpers import REPO, fleet_env, start_server, stop
from tests.support.system import require_tool

ARTIFACTS = REPO / "test-artifacts"
PASSWORD = "browser-test-password-1"
CHROMIUM_ARGS = [
    "--no-sandbox",  # root in a container has no user namespaces
    "--disable-gpu",
    "--disable-background-networking",  # the machine's network is closed: no calls home
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
LIVE_WAIT_MS = 20_000  # the live parts poll every 5 s


@pytest.fixture(scope="module")
def chromium() -> Iterator[object]:
    executable = require_tool("chromium", package="chromium", why="the dashboard's browser tests")
    from playwright.sync_api import sync_playwright

    # Playwright's sync API keeps an event loop in this thread; the tests' own ORM calls are
    # ordinary synchronous calls between its steps.
    os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=executable, args=CHROMIUM_ARGS)
        yield browser
        browser.close()


class Visit:
    """A signed-in browser tab that photographs every page it shows."""

    def __init__(self, page, base: str, name: str) -> None:
        self.page, self.base, self.name, self.shots = page, base, name, 0
        ARTIFACTS.mkdir(exist_ok=True)

    def shoot(self, what: str) -> Path:
        self.shots += 1
        path = ARTIFACTS / f"{self.name}-{self.shots:02d}-{what}.png"
        self.page.screenshot(path=str(path), full_page=True)
        return path

    def go(self, path: str, what: str) -> None:
        self.page.goto(self.base + path)
        self.shoot(what)

    def sign_in(self, username: str) -> None:
        self.page.goto(self.base + "/accounts/login/")
        self.page.fill("#id_username", username)
        self.page.fill("#id_password", PASSWORD)
        self.shoot("sign-in")
        self.page.click("button[type=submit]")
        self.page.wait_for_url(self.base + "/")


def _person(username: str, perms: list[str]):
    user = get_user_model().objects.create_user(username, f"{username}@example.com", PASSWORD)
    for perm in perms:
        app_label, codename = perm.split(".")
        user.user_permissions.add(Permission.objects.get(content_type__app_label=app_label, codename=codename))
    return user


@pytest.fixture
def site_served(transactional_db, fleet, settings):
    """The burnt-in site committed to the test database, people to sign in, and a real server."""
    settings.PASSWORD_HASHERS = global_settings.PASSWORD_HASHERS  # as the server process checks them
    world = build_site(fleet, racks=2)
    _person("operator", OPERATOR)
    _person("viewer", VIEWER)
    server, base = start_server(fleet_env(), workers=1)
    try:
        yield world, base
    finally:
        output = stop(server)
        assert "Traceback" not in output, output[-4000:]


@pytest.fixture
def tab(chromium, site_served, request):
    world, base = site_served
    context = chromium.new_context(viewport={"width": 1400, "height": 1000}, accept_downloads=True)
    page = context.new_page()
    page.set_default_timeout(15_000)
    yield Visit(page, base, request.node.name.removeprefix("test_")[:60]), world
    context.close()


def test_an_operator_follows_a_failure_to_its_evidence_and_reruns_its_rack(tab):
    visit, world = tab
    page = visit.page
    visit.sign_in("operator")
    visit.shoot("overview")
    assert page.inner_text("#role") == "operator"
    assert "3 of 8" in page.inner_text(".site")

    page.click("text=London 1")
    page.wait_for_url(re.compile(r"/sites/lon-1/$"))
    visit.shoot("site")
    page.click("text=Open the grid")
    page.wait_for_url(re.compile(r"/sites/lon-1/grid/"))
    visit.shoot("grid")
    cell = page.locator('tr[data-hostname="a01-n00"] td[data-requirement="hbm-bandwidth"] a')
    assert cell.inner_text() == "✗"

    cell.click()
    page.wait_for_url(re.compile(r"/executions/"))
    visit.shoot("evidence")
    rule = page.locator('tr[data-rule="hbm_bandwidth_tbps.min"]').inner_text()
    assert "≥ 3.6 TB/s" in rule and "2.932 TB/s" in rule and "✗ fail" in rule and "−18.6 %" in rule

    visit.go("/sites/lon-1/failures/?order=target", "failures")
    row = page.locator('tr[data-target="a01-n00"]').inner_text()
    assert "hbm_bandwidth_tbps.min 2.932 TB/s is below ≥ 3.6 TB/s (−18.6 %)" in row
    with page.expect_download() as download:
        page.click("#failures-csv")
    csv_text = Path(download.value.path()).read_text()
    assert "a01-n00,gpu.h200.8x,hbm-bandwidth,failed,hbm_bandwidth_tbps.min,2.932,gte,3.6,TB/s,-18.6," in csv_text

    visit.go("/sites/lon-1/grid/", "grid-again")
    page.select_option('select[name="topology"][aria-label="rack to rerun"]', "rack-a01")
    page.click("#select-rack")
    page.wait_for_url(re.compile(r"/reruns/preview/[0-9a-f-]{36}/$"))
    visit.shoot("preview")
    skips = page.locator("table.skips").inner_text()
    assert "topology_cohort_blocked" in skips and "runs as one cohort" in skips
    assert "already_satisfied" in skips and "it already passed under the current policy" in skips
    assert Job.objects.count() == 0

    page.click("#dispatch")
    page.wait_for_url(re.compile(r"/reruns/[0-9a-f-]{36}/$"))  # the result, a GET page (Post/Redirect/Get)
    visit.shoot("dispatched")
    job = Job.objects.get()
    assert page.locator("a.created-job").inner_text() == str(job.id)
    page.click("a.created-job")
    page.wait_for_url(re.compile(rf"/jobs/{job.id}/"))
    visit.shoot("job")
    assert "queued" in page.inner_text("#job-status") and "a01-n00" in page.inner_text("#job")


def test_an_agent_report_turns_a_cell_from_in_progress_to_passed_without_a_reload(tab):
    visit, world = tab
    page = visit.page
    device = next(d for d in world.devices if d.hostname == "a01-n02")
    requirement = world.requirements["gpu-diag"]
    running = world.fleet.execution(requirement, device=device, status="running", metrics={})
    world.sweep()
    visit.sign_in("viewer")
    visit.go("/sites/lon-1/grid/", "grid-in-progress")
    cell = page.locator('tr[data-hostname="a01-n02"] td[data-requirement="gpu-diag"]')
    assert cell.inner_text().strip() == "◷"
    page.evaluate("window.notReloaded = true")

    # The agent reports the run finished and passing; phase 1 evaluates it; phase 2 reconciles.
    execution_report(
        execution_id=running.id,
        report=ExecutionReport(
            requirement=requirement.name,
            test=None,
            device_id=device.id,
            topology_id=None,
            job_id=None,
            status="completed",
            parameters={},
            metrics={"diag_failed_tests": {"value": 0}},
            error="",
            started_at=running.started_at,
            finished_at=timezone.now(),
        ),
        actor=None,
        reported_by="test agent",
    )
    evaluate_execution(world, running.id)
    world.sweep()

    page.wait_for_function(
        """() => document.querySelector('tr[data-hostname="a01-n02"] td[data-requirement="gpu-diag"]')
                 .innerText.trim() === '✓'""",
        timeout=LIVE_WAIT_MS,
    )
    visit.shoot("grid-passed")
    assert page.evaluate("window.notReloaded") is True


def test_a_viewer_sees_no_dispatch_control_and_a_forged_dispatch_gets_403(tab):
    visit, world = tab
    page = visit.page
    visit.sign_in("viewer")
    assert page.inner_text("#role") == "viewer"
    visit.go("/sites/lon-1/grid/", "grid-viewer")
    for control in ("#preview-selected", "#select-rack", "#select-all-failed", 'input[name="device"]'):
        assert page.locator(control).count() == 0, control
    visit.go("/sites/lon-1/devices/a00-n00/", "device-viewer")
    assert page.locator("#rerun-device").count() == 0
    status = page.evaluate(
        """async () => {
            const token = document.cookie.split('; ').find(c => c.startsWith('csrftoken=')).split('=')[1];
            const body = new URLSearchParams({select: 'every-failing-device', csrfmiddlewaretoken: token});
            const response = await fetch('/sites/lon-1/reruns/dispatch/', {method: 'POST', body});
            return response.status;
        }"""
    )
    assert status == 403
    assert Job.objects.count() == 0


#: Records every Content-Security-Policy violation of the page (before any of its own scripts run).
RECORD_VIOLATIONS = """
window.cspViolations = [];
document.addEventListener('securitypolicyviolation', (e) => {
  const where = e.sourceFile + ':' + e.lineNumber;
  window.cspViolations.push(e.violatedDirective + ' ' + (e.blockedURI || 'inline') + ' ' + where);
});
"""


def test_every_page_works_under_the_content_security_policy(tab):
    """Issue 27, finding 20: the strict policy on every page, and nothing on them breaks it — the
    live parts still refresh (no eval'd trigger filters), the bars keep their widths (no inline
    style), the Swagger UI renders its operations, the admin works."""
    visit, world = tab
    page = visit.page
    page.context.add_init_script(RECORD_VIOLATIONS)
    console = []
    page.on("console", lambda m: console.append(m.text) if "Content Security Policy" in m.text else None)
    get_user_model().objects.create_superuser("root", "root@example.com", PASSWORD)
    visit.sign_in("root")
    device = world.devices[1]
    from tests.burnin.certs import current

    certified = current(device)
    pages = [
        "/",
        "/sites/lon-1/",
        "/sites/lon-1/grid/",
        "/sites/lon-1/failures/",
        f"/sites/lon-1/devices/{device.hostname}/",
        "/sites/lon-1/metrics/hbm-bandwidth/",
        "/jobs/",
        "/what-if/",
        "/sites/lon-1/devices/no-such-host/",
        "/jobs/?before_at=2020-13-45T00:00:00&before_id=x",
        "/admin/",
        "/admin/inventory/device/",
        f"/admin/inventory/device/{device.id}/change/",
    ]
    assert certified is not None
    if certified is not None:
        pages.append(f"/sites/lon-1/devices/{device.hostname}/certificate/")
    violations = {}
    for path in pages:
        response = page.goto(visit.base + path)
        assert "default-src 'self'" in response.headers["content-security-policy"], path
        page.wait_for_load_state("load")
        found = page.evaluate("window.cspViolations")
        if found:
            violations[path] = found
    visit.go("/sites/lon-1/", "site-under-csp")
    bar = page.locator(".bar span").first
    assert bar.bounding_box()["width"] > 10  # the width class applied (it was an inline style)
    # The live part refreshes: htmx's polling request comes within the 5 s of its trigger.
    with page.expect_request(lambda r: "fragment=progress" in r.url, timeout=LIVE_WAIT_MS):
        pass
    # Paused, it stops (dashboard.js cancels the polling; it was an eval'd trigger filter).
    polled = []
    page.on("request", lambda r: polled.append(r.url) if "fragment=progress" in r.url else None)
    page.click("[data-pause]")
    page.wait_for_timeout(6_000)
    assert polled == [] and page.get_attribute("[data-pause]", "aria-pressed") == "true"
    response = page.goto(visit.base + "/api/docs/")
    assert "img-src 'self' data:" in response.headers["content-security-policy"]
    page.wait_for_selector(".opblock", timeout=LIVE_WAIT_MS)  # the operations are drawn
    visit.shoot("swagger-ui")
    found = page.evaluate("window.cspViolations")
    if found:
        violations["/api/docs/"] = found
    assert violations == {} and console == [], (violations, console)


def test_a_rack_that_has_not_run_says_which_member_blocks_it(tab):
    """Issue 27, finding 4: the rack's cell and its members' pages name the blocker, in the words
    of the rule the rerun preview applies (`topology_cohort_blocked`)."""
    visit, world = tab
    page = visit.page
    world.add_racks(1)  # rack-a02: a02-n00 fails hbm-bandwidth, so the collective has not run
    visit.sign_in("operator")
    visit.go("/sites/lon-1/grid/", "grid-blocked-rack")
    cell = page.locator('tr[data-hostname="a02-n01"] td[data-requirement="rack-nccl"]')
    assert "blocked: a02-n00 failed hbm-bandwidth" in cell.inner_text()
    assert cell.locator(".blocked").is_visible()
    page.click('tr[data-hostname="a02-n01"] a[href$="/devices/a02-n01/"]')
    page.wait_for_url(re.compile(r"/devices/a02-n01/$"))
    visit.shoot("device-blocked-rack")
    row = page.locator('table.requirements tr[data-requirement="rack-nccl"]').inner_text()
    assert "not run" in row and "blocked: a02-n00 failed hbm-bandwidth" in row


def test_a_failure_the_device_and_the_evidence_open_the_metric_picture_at_their_point(tab):
    """Issue 27, finding 12: from a failure, a device or an execution, one click shows the value
    among the fleet's, the point ringed and named without hovering; failures are named too."""
    visit, world = tab
    page = visit.page
    visit.sign_in("viewer")
    visit.go("/sites/lon-1/failures/?order=target", "failures-before-picture")
    page.click('tr[data-target="a00-n00"] a.metric-link')
    # The failure's link opens on its failing metric's picture (0f5623a): the metric and its anchor.
    page.wait_for_url(
        re.compile(r"/sites/lon-1/metrics/hbm-bandwidth/\?highlight=a00-n00&metric=hbm_bandwidth_tbps\.min#m-")
    )
    visit.shoot("picture-from-failure")
    ring = page.locator('circle.pt-highlight[data-target="a00-n00"]')
    assert ring.count() == 1 and ring.is_visible()
    labels = page.locator("text.pt-label").all_text_contents()
    assert "a00-n00" in labels and "a01-n00" in labels  # both failures named, not only on hover
    assert page.locator('a[data-target="a00-n01"] title').count() == 1  # a passing point: its title

    visit.go("/sites/lon-1/devices/a00-n01/", "device-before-picture")
    page.click('table.requirements tr[data-requirement="hbm-bandwidth"] a.metric-link')
    page.wait_for_url(re.compile(r"\?highlight=a00-n01(&metric=[\w.]+#[\w.-]+)?$"))
    visit.shoot("picture-from-device")
    assert page.locator('circle.pt-highlight[data-target="a00-n01"]').is_visible()
    assert "a00-n01" in page.locator("text.pt-label-highlight").all_text_contents()

    visit.go("/sites/lon-1/failures/?order=target", "failures-to-evidence")
    page.click('tr[data-target="a01-n00"] a:text-is("execution")')
    page.wait_for_url(re.compile(r"/executions/"))
    page.click('tr[data-rule="hbm_bandwidth_tbps.min"] a.metric-link')
    page.wait_for_url(re.compile(r"\?highlight=a01-n00$"))
    visit.shoot("picture-from-evidence")
    assert page.locator('circle.pt-highlight[data-target="a01-n00"]').is_visible()
