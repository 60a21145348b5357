"""Health evidence on the pages: the execution page's Xid table (logged text escaped), ECC counters
and throttle reasons; the device page and the repair queue naming the fatal Xid that moved a device;
a constant number of queries whatever the evidence holds."""

from __future__ import annotations

import re

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from fleet.inventory.models import Device
from fleet_rules.vocabulary import DeviceState
from tests.dashboard import test_browser as harness
from tests.dashboard.conftest import VIEWER

RC = "gpu.h200.8x"
SCRIPT = "<script>alert('xid')</script>"
HOSTILE = f'{SCRIPT} =HYPERLINK("http://evil.example") \x1b[31mred <b>bold</b>'


def xid(
    code: int, *, message: str = "NVRM: Xid", pci: str | None = "0000:3b:00", at: str | None = "2026-11-30T10:12:00Z"
):
    return {"kind": "xid", "code": code, "pci_bus_id": pci, "message": message, "at": at}


def window(*events: dict) -> dict:
    return {
        "window": {"since": "2026-11-30T10:00:00Z", "until": "2026-11-30T10:30:00Z"},
        "source": "dmesg",
        "xid_events": list(events),
        "ecc": {
            "before": {"ecc_uncorrected_aggregate": 1, "row_remap_pending": 0, "retired_pages_dbe": None},
            "after": {"ecc_uncorrected_aggregate": 4, "row_remap_pending": 0, "retired_pages_dbe": None},
        },
        "throttle_reasons_seen": ["hw_slowdown", "sw_thermal_slowdown"],
    }


@pytest.fixture
def health_site(fleet):
    site = fleet.site("lon-1")
    satellite = fleet.satellite(site, "sat-a")
    policy = fleet.policy(RC)
    requirement = fleet.requirement(
        policy,
        "gpu-health-window",
        test="health-window",
        thresholds=[{"metric": "xid_fatal_count", "comparator": "eq", "threshold": 0}],
    )
    return site, satellite, requirement


def report(fleet, requirement, device, *events: dict):
    return fleet.execution(
        requirement, device=device, health=window(*events), metrics={"xid_fatal_count": {"value": 0}}
    )


def test_the_execution_page_shows_the_events_escaped_the_counters_and_the_throttle_reasons(fleet, health_site, person):
    _, satellite, requirement = health_site
    device = fleet.device(satellite, RC, hostname="a01-n00")
    execution = report(fleet, requirement, device, xid(13, message=HOSTILE, at=None), xid(79, pci=None))
    page = person(VIEWER).get(f"/executions/{execution.id}/")
    assert page.status_code == 200
    text = page.content.decode()
    assert SCRIPT not in text and "<b>bold</b>" not in text
    assert "&lt;script&gt;alert(&#x27;xid&#x27;)&lt;/script&gt;" in text
    assert 'data-code="13"' in text and 'data-code="79"' in text
    assert "✗ fatal" in text and "GPU has fallen off the bus" in text and "— not fatal" in text
    assert "1 fatal event</strong> in this window: Xid 79 (GPU has fallen off the bus) at 2026-11-30T10:12:00Z" in text
    assert 'data-counter="ecc_uncorrected_aggregate"' in text and "✗ +3" in text
    assert "hardware slowdown" in text and "software thermal slowdown" in text
    assert "Read by the agent around the job (dmesg)" in text


def test_an_execution_without_health_shows_no_health_section(fleet, health_site, person):
    _, satellite, requirement = health_site
    device = fleet.device(satellite, RC, hostname="a01-n00")
    execution = fleet.execution(requirement, device=device, metrics={"xid_fatal_count": {"value": 0}})
    text = person(VIEWER).get(f"/executions/{execution.id}/").content.decode()
    assert "Health of the window" not in text


def test_the_device_page_says_which_xid_sent_it_to_repair(fleet, health_site, person):
    _, satellite, requirement = health_site
    device = fleet.device(satellite, RC, hostname="a01-n00")
    report(fleet, requirement, device, xid(79, message=HOSTILE))  # a reboot asked (docs/remediation.md)
    execution = report(fleet, requirement, device, xid(79, message=HOSTILE))  # again: repair
    assert Device.objects.get(id=device.id).state == DeviceState.NEEDS_REPAIR
    text = person(VIEWER).get("/sites/lon-1/devices/a01-n00/").content.decode()
    assert "Needs repair</strong> since" in text
    assert (
        "Xid 79 (GPU has fallen off the bus) on GPU 0000:3b:00: reboot asked; 2nd in 24 h: repair during its burn-in"
        in text
    )
    assert f'href="/executions/{execution.id}/#health">the window that logged it' in text
    assert 'id="fatal-xid"' in text and SCRIPT not in text
    assert 'id="fatal-in-service"' not in text


def test_a_device_in_service_is_flagged_not_pulled(fleet, health_site, person):
    _, satellite, requirement = health_site
    device = fleet.device(satellite, RC, hostname="a01-n00", state=DeviceState.IN_SERVICE)
    report(fleet, requirement, device, xid(48))
    assert Device.objects.get(id=device.id).state == DeviceState.IN_SERVICE
    text = person(VIEWER).get("/sites/lon-1/devices/a01-n00/").content.decode()
    assert 'id="fatal-in-service"' in text and "never pulled automatically" in text
    assert "Xid 48 (double-bit ECC error (uncorrectable memory error))" in text


def test_the_repair_queue_names_the_xid(fleet, health_site, person):
    _, satellite, requirement = health_site
    device = fleet.device(satellite, RC, hostname="a01-n00")
    report(fleet, requirement, device, xid(79))
    execution = report(fleet, requirement, device, xid(79))
    text = person(["inventory.view_device"]).get("/sites/lon-1/repairs/").content.decode()
    assert 'data-hostname="a01-n00"' in text
    assert "Xid 79 (GPU has fallen off the bus) on GPU 0000:3b:00: reboot asked; 2nd in 24 h: repair" in text
    assert "the ladder taken: reboot at " in text  # why the ladder ended
    assert f'href="/executions/{execution.id}/"' in text


def test_the_pages_cost_the_same_queries_whatever_the_evidence_holds(fleet, health_site, person):
    _, satellite, requirement = health_site
    client = person([*VIEWER, "inventory.view_device"])
    small = fleet.device(satellite, RC, hostname="a01-n00")
    large = fleet.device(satellite, RC, hostname="a01-n01")
    few = report(fleet, requirement, small, xid(79))
    many = [report(fleet, requirement, large, *[xid(13 if i % 2 else 79) for i in range(1000)]) for _ in range(7)]

    def queries(path: str) -> int:
        with CaptureQueriesContext(connection) as captured:
            response = client.get(path)
        assert response.status_code == 200
        return len(captured)

    assert queries(f"/executions/{few.id}/") == queries(f"/executions/{many[-1].id}/")
    assert queries("/sites/lon-1/devices/a01-n00/") == queries("/sites/lon-1/devices/a01-n01/")
    text = client.get("/sites/lon-1/devices/a01-n01/").content.decode()
    assert text.count('class="fatal-window"') == 5  # the newest five windows, bounded


def test_an_execution_not_evaluated_yet_shows_its_rules_without_a_margin(fleet, health_site, person):
    """A defect found here: the page answered 500 for an execution whose rules had no outcome yet."""
    _, satellite, requirement = health_site
    device = fleet.device(satellite, RC, hostname="a01-n00")
    execution = fleet.execution(requirement, device=device, metrics={"xid_fatal_count": {"value": 0}})
    page = person(VIEWER).get(f"/executions/{execution.id}/")
    assert page.status_code == 200
    assert 'data-rule="xid_fatal_count"' in page.content.decode()


# --- in a real browser ------------------------------------------------------------------------------

# The browser, the served site and the signed-in tab of the dashboard's browser tests.
chromium, site_served, tab = harness.chromium, harness.site_served, harness.tab
TRAP = "<img src=x onerror=\"document.title='pwned'\"><script>document.title='pwned'</script>"


def test_in_a_browser_the_fatal_xid_leads_from_the_device_to_its_window_and_logged_text_stays_text(tab):
    visit, world = tab
    page = visit.page
    device = Device.objects.get(hostname="a01-n03")
    policy = world.requirements["gpu-diag"].policy
    requirement = world.fleet.requirement(
        policy,
        "gpu-health-window",
        test="health-window",
        thresholds=[{"metric": "xid_fatal_count", "comparator": "eq", "threshold": 0}],
    )
    report(world.fleet, requirement, device, xid(79, message=TRAP))  # a reboot asked; then again: repair
    report(world.fleet, requirement, device, xid(13, message=TRAP), xid(79, message=TRAP))
    assert Device.objects.get(id=device.id).state == DeviceState.NEEDS_REPAIR

    visit.sign_in("viewer")
    visit.go("/sites/lon-1/devices/a01-n03/", "device-fatal-xid")
    banner = page.inner_text("#needs-repair")
    assert "Xid 79 (GPU has fallen off the bus) on GPU 0000:3b:00" in banner
    page.click("#needs-repair a")
    page.wait_for_url(re.compile(r"/executions/[0-9a-f-]+/#health$"))
    visit.shoot("execution-health")
    table = page.inner_text("table.xid-events")
    assert table.count(TRAP) == 2  # shown as the text it is
    assert page.title() != "pwned" and page.locator("table.xid-events img").count() == 0
    assert "✗ fatal" in table and "GPU has fallen off the bus" in table


def test_the_device_page_shows_the_remediation_ladder_taken(fleet, health_site, person):
    _, satellite, requirement = health_site
    device = fleet.device(satellite, RC, hostname="a01-n00")
    report(fleet, requirement, device, xid(95, message=HOSTILE))

    text = person(VIEWER).get("/sites/lon-1/devices/a01-n00/").content.decode()

    assert 'id="remediation"' in text and '<tr data-step="reset_gpu">' in text
    assert "GPU reset" in text and "◷ under way" in text
    assert "Xid 95 (Uncontained memory error) on GPU 0000:3b:00: GPU reset asked" in text and SCRIPT not in text
