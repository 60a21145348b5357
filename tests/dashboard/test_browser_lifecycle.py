"""In a real browser: an operator follows a device from failing to needs repair, records its
repair, and sees it burned in again and accepted. Screenshots go to test-artifacts/."""

from __future__ import annotations

import re

from fleet.inventory.models import Device
from fleet.jobs.models import Job
from fleet.lifecycle.models import Repair
from fleet_rules.vocabulary import DeviceState
from tests.dashboard import test_browser as harness

# The browser, the served site and the signed-in tab of the dashboard's browser tests.
chromium, site_served, tab = harness.chromium, harness.site_served, harness.tab

FAILING = {"hbm_bandwidth_tbps": {"value": 3.4, "unit": "TB/s", "statistics": {"min": 2.932}}}
PASSING = {"hbm_bandwidth_tbps": {"value": 4.5, "unit": "TB/s", "statistics": {"min": 4.0}}}


def test_an_operator_takes_a_failing_device_through_repair_to_accepted(tab):
    visit, world = tab
    page = visit.page
    device = Device.objects.get(hostname="a00-n00")  # its hbm-bandwidth failed once; its rack passed
    for _ in range(2):  # two more failures, as the agent reports them: the third sends it to repair
        world.report("hbm-bandwidth", device=device, metrics=FAILING)
        world.sweep()
    assert Device.objects.get(id=device.id).state == DeviceState.NEEDS_REPAIR

    visit.sign_in("operator")
    visit.shoot("overview")
    page.click('[data-site="lon-1"] a.needs-repair')
    page.wait_for_url(re.compile(r"/sites/lon-1/repairs/$"))
    visit.shoot("repair-queue")
    row = page.locator('tr[data-hostname="a00-n00"]').inner_text()
    assert "hbm-bandwidth failed 3 times" in row and "2.932 TB/s is below ≥ 3.6 TB/s" in row

    page.click('tr[data-hostname="a00-n00"] a.repair')
    page.wait_for_url(re.compile(r"/sites/lon-1/devices/a00-n00/repair/\?token="))
    visit.shoot("repair-form")
    page.fill("#summary", "reseated the HBM stack's GPU, swapped GPU 3")
    page.fill('input[name="part_kind"]', "gpu")
    page.fill('input[name="part_slot"]', "3")
    page.fill('input[name="removed_serial"]', "1652")
    page.fill('input[name="installed_serial"]', "1653")
    page.check("#confirm")
    page.click("#record-repair")
    page.wait_for_url(re.compile(r"/sites/lon-1/devices/a00-n00/$"))
    visit.shoot("device-repaired")
    assert page.inner_text("#device-state") == "◷ burn-in"
    lifecycle = page.inner_text("#lifecycle")
    assert "swapped GPU 3" in lifecycle and "gpu slot 3 1652 → 1653" in lifecycle
    repair = Repair.objects.get()
    (job,) = Job.objects.filter(id__in=repair.job_ids)

    # Its re-burn-in passes (the agent's report), the sweep certifies it: the device is accepted.
    world.report("hbm-bandwidth", device=device, metrics=PASSING)
    world.sweep()
    visit.go("/sites/lon-1/devices/a00-n00/", "device-accepted")
    assert page.inner_text("#device-state") == "✓ accepted"
    history = page.locator("#lifecycle table.history").inner_text()
    assert "certificate_issued" in history and "repair" in history and "failed_too_often" in history
    assert job.requirement_names  # the repair dispatched a real job of its requirements
