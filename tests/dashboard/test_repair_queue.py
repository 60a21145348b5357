"""The repair queue page: devices in needs_repair with why and since when, the breaker banner, a
constant number of queries whatever the queue's length."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from fleet_rules.vocabulary import WorkflowName
from tests.burnin.certs import evaluate_now, sweep

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
