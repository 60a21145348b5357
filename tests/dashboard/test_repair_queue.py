"""The repair queue page: devices in needs_repair with why and since when, the breaker banner, a
constant number of queries whatever the queue's length."""

from __future__ import annotations

import re

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from fleet.inventory.models import Device
from fleet.jobs.models import Job
from fleet.lifecycle.models import Breaker, Repair
from fleet.lifecycle.services import device_transition
from fleet_rules.vocabulary import DeviceState, Mover, WorkflowName
from tests.burnin.certs import evaluate_now, sweep
from tests.dashboard.conftest import OPERATOR, preview

RC = "gpu.h200.8x"
FAIL = {"diag_failed_tests": {"value": 2}}


@pytest.fixture
def diag(fleet):
    policy = fleet.policy(RC)
    policy.repair_after_failures = 1
    policy.save()
    return fleet.requirement(policy, "gpu-diag")


def send_to_repair(fleet, diag, slug: str, count: int):
    satellite = fleet.satellite(fleet.site(slug), "sat-a", workflows=list(WorkflowName.values))
    devices = [fleet.device(satellite, RC, hostname=f"{slug}-n{i:02d}") for i in range(count)]
    for device in devices:
        evaluate_now(fleet.execution(diag, device=device, metrics=FAIL))
    sweep(satellite)
    return devices


def test_the_queue_lists_devices_with_why_and_the_open_breaker(fleet, diag, person):
    send_to_repair(fleet, diag, "lon-1", 5)  # the breaker's floor of 3: two held, the breaker open
    page = person(["inventory.view_device"]).get("/sites/lon-1/repairs/")
    assert page.status_code == 200
    text = page.content.decode()
    assert text.count('data-hostname="lon-1-n') == 3
    assert "gpu-diag failed 1 times under the current policy version" in text
    assert "Circuit breaker open" in text and "2 automatic moves to repair held" in text


def test_a_person_without_the_permission_is_refused(fleet, diag, person):
    send_to_repair(fleet, diag, "lon-1", 1)
    assert person([]).get("/sites/lon-1/repairs/").status_code == 403


def test_the_page_takes_the_same_queries_at_two_queue_lengths(fleet, diag, person):
    diag.policy.breaker_share = 1.0
    diag.policy.save()
    client = person(["inventory.view_device"])
    send_to_repair(fleet, diag, "lon-1", 2)
    send_to_repair(fleet, diag, "par-1", 12)

    def queries(slug: str) -> int:
        with CaptureQueriesContext(connection) as captured:
            response = client.get(f"/sites/{slug}/repairs/")
        assert response.status_code == 200
        return len(captured)

    assert queries("lon-1") == queries("par-1")


OPERATOR_PERMS = ["inventory.view_device", "inventory.change_device", "jobs.add_job", "jobs.view_job"]


def _form_token(page: str) -> str:
    return re.search(r'name="token" value="([^"]+)"', page).group(1)


def test_an_operator_records_a_repair_once_whatever_the_reloads(fleet, diag, person):
    fleet.profile(RC, "dcgm-diag", {"level": 3})
    (device,) = send_to_repair(fleet, diag, "lon-1", 1)
    operator = person(OPERATOR_PERMS)
    queue = operator.get("/sites/lon-1/repairs/").content.decode()
    assert 'href="/sites/lon-1/devices/lon-1-n00/repair/"' in queue
    opened = operator.get("/sites/lon-1/devices/lon-1-n00/repair/")
    assert opened.status_code == 302 and "token=" in opened["Location"]
    form = operator.get(opened["Location"])
    assert form.status_code == 200 and form["Cache-Control"] == "no-store"
    page = form.content.decode()
    assert "goes back to burn-in" in page
    operator.get("/jobs/")
    body = {
        "csrfmiddlewaretoken": operator.cookies["csrftoken"].value,
        "token": _form_token(page),
        "summary": "swapped GPU 3",
        "part_kind": "gpu",
        "part_slot": "3",
        "removed_serial": "1652",
        "installed_serial": "1653",
        "rerun": "all",
        "confirm": "on",
    }
    first = operator.post("/sites/lon-1/devices/lon-1-n00/repair/", body)
    assert first.status_code == 303 and first["Location"] == "/sites/lon-1/devices/lon-1-n00/"
    again = operator.post("/sites/lon-1/devices/lon-1-n00/repair/", body)  # a reload
    assert again.status_code == 303 and again["Location"] == first["Location"]
    repair = Repair.objects.get()
    assert repair.parts == [{"kind": "gpu", "slot": "3", "removed_serial": "1652", "installed_serial": "1653"}]
    assert Device.objects.get(id=device.id).state == DeviceState.BURN_IN
    assert Job.objects.count() == 1 and repair.job_ids == [str(Job.objects.get().id)]
    used = operator.get(opened["Location"]).content.decode()  # back to the used form
    assert "This repair was already recorded" in used and 'id="record-repair"' not in used


def test_an_unconfirmed_repair_records_nothing(fleet, diag, person):
    send_to_repair(fleet, diag, "lon-1", 1)
    operator = person(OPERATOR_PERMS)
    form = operator.get(operator.get("/sites/lon-1/devices/lon-1-n00/repair/")["Location"]).content.decode()
    response = operator.post(
        "/sites/lon-1/devices/lon-1-n00/repair/",
        {"csrfmiddlewaretoken": operator.cookies["csrftoken"].value, "token": _form_token(form), "summary": "x"},
    )
    assert response.status_code == 400 and "Tick the confirmation" in response.content.decode()
    assert not Repair.objects.exists()


def test_a_viewer_is_told_which_role_records_repairs(fleet, diag, person):
    send_to_repair(fleet, diag, "lon-1", 1)
    viewer = person(["inventory.view_device"])
    queue = viewer.get("/sites/lon-1/repairs/").content.decode()
    assert "Record repair" not in queue
    refused = viewer.get("/sites/lon-1/devices/lon-1-n00/repair/?token=00000000-0000-4000-8000-000000000000")
    assert refused.status_code == 403 and "record repairs you need the operator role" in refused.content.decode()


def test_an_operator_closes_a_breaker_from_the_queue(fleet, diag, person):
    send_to_repair(fleet, diag, "lon-1", 5)
    operator = person(OPERATOR_PERMS)
    page = operator.get("/sites/lon-1/repairs/").content.decode()
    token = re.search(r'class="card confirm breaker-reset">.*?name="token" value="([^"]+)"', page, re.S).group(1)
    body = {
        "csrfmiddlewaretoken": operator.cookies["csrftoken"].value,
        "token": token,
        "reason": "the hardware is broken",
        "confirm": "on",
    }
    response = operator.post(f"/sites/lon-1/breakers/{RC}/reset/", body)
    assert response.status_code == 303 and response["Location"] == "/sites/lon-1/repairs/"
    assert Breaker.objects.filter(closed_at__isnull=False).count() == 1


def test_the_device_page_says_the_state_why_it_needs_repair_and_its_history(fleet, diag, person):
    send_to_repair(fleet, diag, "lon-1", 1)
    operator = person(OPERATOR_PERMS + ["burnin.view_policyprogress", "burnin.view_testexecution"])
    page = operator.get("/sites/lon-1/devices/lon-1-n00/").content.decode()
    assert '<span class="state state-needs_repair" id="device-state">✗ needs repair</span>' in page
    assert "Needs repair</strong> since" in page and "gpu-diag failed 1 times" in page
    assert 'href="/sites/lon-1/devices/lon-1-n00/repair/" id="record-repair-link"' in page
    assert 'class="change cause-failed_too_often"' in page
    overview = operator.get("/").content.decode()
    assert 'href="/sites/lon-1/repairs/" class="needs-repair">1</a>' in overview
    assert "enrolled devices certified" in overview


def test_the_site_page_warns_of_an_open_breaker(fleet, diag, person):
    send_to_repair(fleet, diag, "lon-1", 5)
    page = person(["burnin.view_policyprogress", "inventory.view_device"]).get("/sites/lon-1/").content.decode()
    assert "Circuit breaker open for gpu.h200.8x" in page and "suspect the test or the policy" in page


def test_a_device_in_service_whose_certificate_stopped_holding_says_so(fleet, diag, person):
    satellite = fleet.satellite(fleet.site("lon-1"), "sat-a", workflows=list(WorkflowName.values))
    device = fleet.device(satellite, RC, hostname="lon-1-n00")
    diag.policy.repair_after_failures = 0
    diag.policy.save()
    evaluate_now(fleet.execution(diag, device=device, metrics={"diag_failed_tests": {"value": 0}}))
    sweep(satellite)
    device_transition(device_id=device.id, to=DeviceState.IN_SERVICE, mover=Mover.OPERATOR, actor="u", certified=True)
    evaluate_now(fleet.execution(diag, device=device, metrics=FAIL))
    sweep(satellite)
    page = person(OPERATOR).get("/sites/lon-1/devices/lon-1-n00/")
    text = page.content.decode()
    assert "✓ in service" in text and "in service without a valid certificate" in text


def test_a_rerun_preview_of_a_device_in_repair_says_why_and_links_the_repair_form(fleet, diag, person):
    (device,) = send_to_repair(fleet, diag, "lon-1", 1)
    operator = person(OPERATOR)
    _, page = preview(operator, {"device": str(device.id)})
    assert 'data-reason="device_ineligible"' in page
    assert "lon-1-n00</strong> needs repair" in page
    assert 'href="/sites/lon-1/devices/lon-1-n00/repair/"' in page


def test_the_queue_links_each_devices_evidence_pack(fleet, diag, person):
    (device,) = send_to_repair(fleet, diag, "lon-1", 1)
    page = person(["inventory.view_device"]).get("/sites/lon-1/repairs/").content.decode()
    assert f'href="/api/v1/devices/{device.id}/evidence-pack/"' in page
