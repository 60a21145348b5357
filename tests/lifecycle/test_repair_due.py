"""Failing too often sends a device to repair, caused by the reconcile page that writes the Nth
failure and by nothing else; the circuit breaker holds the moves beyond its share."""

from __future__ import annotations

from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from fleet.inventory.models import Device
from fleet.lifecycle.breakers import guarded_repair_moves_apply
from fleet.lifecycle.models import Breaker, DeviceStateChange, Repair
from fleet.lifecycle.services import AutomaticMove
from fleet_rules.vocabulary import DeviceState, TransitionCause
from tests.burnin.certs import current, evaluate_now, sweep

RC = "gpu.h200.8x"
PASS = {"diag_failed_tests": {"value": 0}}
FAIL = {"diag_failed_tests": {"value": 2}}


class Site:
    def __init__(self, fleet, devices: int = 3, **policy):
        self.fleet = fleet
        self.satellite = fleet.satellite(fleet.site("lon-1"), "sat-a")
        self.policy = fleet.policy(RC)
        for k, v in policy.items():
            setattr(self.policy, k, v)
        self.policy.save()
        self.diag = fleet.requirement(self.policy, "gpu-diag")
        self.devices = [fleet.device(self.satellite, RC, hostname=f"n{i:02d}") for i in range(devices)]

    def report(self, device, metrics, status="completed", error=""):
        evaluate_now(self.fleet.execution(self.diag, device=device, metrics=metrics, status=status, error=error))

    def fail(self, devices, times: int = 1):
        for _ in range(times):
            for device in devices:
                self.report(device, FAIL)
            sweep(self.satellite)


def state(device) -> str:
    return Device.objects.get(id=device.id).state


def test_the_third_failure_sends_the_device_to_repair_and_not_before(fleet):
    site = Site(fleet)
    site.fail(site.devices[:1], times=2)
    assert state(site.devices[0]) == DeviceState.BURN_IN
    site.fail(site.devices[:1])
    assert state(site.devices[0]) == DeviceState.NEEDS_REPAIR
    (change,) = DeviceStateChange.objects.filter(device=site.devices[0])
    assert change.cause == TransitionCause.FAILED_TOO_OFTEN and not change.held
    assert change.refs["requirement"] == "gpu-diag" and change.refs["failures"] == 3
    assert "gpu-diag failed 3 times" in change.reason
    assert [state(d) for d in site.devices[1:]] == [DeviceState.BURN_IN, DeviceState.BURN_IN]


def test_errors_do_not_count_as_failures(fleet):
    site = Site(fleet)
    device = site.devices[0]
    site.fail([device], times=2)
    for _ in range(3):
        site.report(device, {}, status="errored", error="the agent lost the node")
        sweep(site.satellite)
    assert state(device) == DeviceState.BURN_IN


def test_the_errors_and_passes_among_a_target_s_attempts_are_not_counted_with_its_failures(fleet):
    # given a target whose attempts are an error, a pass and two failures (the write counts them
    # when it stores the failure: one pass over the history for the outcomes and the failures)
    site = Site(fleet)
    device = site.devices[0]
    site.report(device, {}, status="errored", error="the agent lost the node")
    site.report(device, PASS)
    sweep(site.satellite)
    site.fail([device], times=2)
    # then two failures are two, not four
    assert state(device) == DeviceState.BURN_IN
    # and the third sends it to repair, counted as three
    site.fail([device])
    assert state(device) == DeviceState.NEEDS_REPAIR
    (change,) = DeviceStateChange.objects.filter(device=device, cause=TransitionCause.FAILED_TOO_OFTEN)
    assert change.refs["failures"] == 3


def test_the_setting_decides_how_many_failures(fleet):
    site = Site(fleet, repair_after_failures=1)
    site.fail(site.devices[:1])
    assert state(site.devices[0]) == DeviceState.NEEDS_REPAIR
    site.policy.repair_after_failures = 0  # never
    site.policy.save()
    site.fail(site.devices[1:2], times=4)
    assert state(site.devices[1]) == DeviceState.BURN_IN


def test_a_device_in_repair_is_not_dispatched(fleet, bearer):
    site = Site(fleet, repair_after_failures=1)
    site.fail(site.devices[:1])
    response = bearer(["job:create", "fleet:read"]).post(
        f"/api/v1/burn-in/sites/{site.satellite.site_id}/rerun-plans/dispatch/",
        {"device_ids": [str(site.devices[0].id)]},
        format="json",
    )
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["created_jobs"] == []
    assert body["skips"] == [
        {
            "device_ids": [str(site.devices[0].id)],
            "topology": None,
            "resource_class": RC,
            "requirement_name": "gpu-diag",
            "reason": "device_ineligible",
        }
    ]


def test_the_breaker_holds_the_moves_beyond_its_share_and_records_them(fleet):
    site = Site(fleet, devices=10, repair_after_failures=1)  # limit: max(3, 20 % of 10) = 3
    site.fail(site.devices[:5])
    moved = [d for d in site.devices if state(d) == DeviceState.NEEDS_REPAIR]
    assert len(moved) == 3
    held = DeviceStateChange.objects.filter(held=True)
    assert held.count() == 2 and {h.cause for h in held} == {TransitionCause.HELD_BY_BREAKER}
    assert all(state(h.device) == DeviceState.BURN_IN for h in held)
    breaker = Breaker.objects.get()
    assert breaker.closed_at is None and "5 of 10 gpu.h200.8x devices at lon-1" in breaker.detail
    # while open, every further automatic move of the scope is held
    site.fail(site.devices[5:6])
    assert state(site.devices[5]) == DeviceState.BURN_IN
    assert DeviceStateChange.objects.filter(held=True).count() == 3


def test_a_page_that_sends_devices_to_repair_sends_the_same_statements_whatever_their_number(fleet):
    def statements(site_slug: str, failing: int) -> int:
        satellite = fleet.satellite(fleet.site(site_slug), "sat-a")
        devices = [fleet.device(satellite, RC, hostname=f"{site_slug}-n{i:02d}") for i in range(failing)]
        # a device of the scope passed gpu-diag: no suspect requirement, the share (100 %) alone guards
        evaluate_now(
            fleet.execution(diag, device=fleet.device(satellite, RC, hostname=f"{site_slug}-ok"), metrics=PASS)
        )
        sweep(satellite)
        for device in devices:
            evaluate_now(fleet.execution(diag, device=device, metrics=FAIL))
        with CaptureQueriesContext(connection) as captured:
            sweep(satellite)
        assert all(state(d) == DeviceState.NEEDS_REPAIR for d in devices)
        return len(captured)

    policy = fleet.policy(RC)
    policy.repair_after_failures, policy.breaker_share = 1, 1.0
    policy.save()
    diag = fleet.requirement(policy, "gpu-diag")
    assert statements("lon-1", 2) == statements("par-1", 12)


def test_a_requirement_no_device_passed_opens_the_breaker_at_its_minimum(fleet):
    """A wrong threshold fails a whole class on one requirement: the breaker opens as the minimum
    (3) of them go to repair while no device of the class has passed it, whatever its share would
    allow (here 100 %): the rest are held and the breaker says why."""
    site = Site(fleet, devices=12, repair_after_failures=1, breaker_share=1.0)
    site.fail(site.devices[:2])
    assert [state(d) for d in site.devices[:2]] == [DeviceState.NEEDS_REPAIR] * 2
    assert not Breaker.objects.exists()
    site.fail(site.devices[2:10])
    assert sum(state(d) == DeviceState.NEEDS_REPAIR for d in site.devices) == 3
    breaker = Breaker.objects.get()
    assert breaker.closed_at is None and "for gpu-diag" in breaker.detail and "no device of the class" in breaker.detail
    assert DeviceStateChange.objects.filter(held=True).count() == 7


def test_a_requirement_another_device_passed_goes_to_the_share(fleet):
    site = Site(fleet, devices=12, repair_after_failures=1, breaker_share=1.0)
    site.report(site.devices[11], PASS)
    sweep(site.satellite)
    site.fail(site.devices[:10])
    assert sum(state(d) == DeviceState.NEEDS_REPAIR for d in site.devices) == 10
    assert not Breaker.objects.exists()


def test_a_page_that_writes_failures_below_the_count_sends_what_a_passing_page_sends(fleet):
    """The page's write counts the failures of what it stored as failed: judging them costs no
    statement until a device reaches `repair_after_failures`."""

    def statements(site_slug: str, metrics: dict, then: DeviceState) -> int:
        satellite = fleet.satellite(fleet.site(site_slug), "sat-a")
        devices = [fleet.device(satellite, RC, hostname=f"{site_slug}-n{i:02d}") for i in range(4)]
        for device in devices:
            evaluate_now(fleet.execution(diag, device=device, metrics=metrics))
        with CaptureQueriesContext(connection) as captured:
            sweep(satellite)
        assert all(state(d) == then for d in devices)
        return len(captured)

    diag = fleet.requirement(fleet.policy(RC), "gpu-diag")
    assert statements("lon-1", FAIL, DeviceState.BURN_IN) == statements("par-1", PASS, DeviceState.ACCEPTED)


def test_a_repaired_device_proves_its_consecutive_passes_again(fleet):
    """A pass before a repair is evidence about the hardware that was replaced: with
    `consecutive_passes` 2, one pass before the repair and one after certify nothing."""
    site = Site(fleet, devices=1)
    site.diag.consecutive_passes = 2
    site.diag.save()
    (device,) = site.devices
    site.report(device, PASS)
    Repair.objects.create(device=device, summary="GPU 3 swapped", actor="tech", created_at=timezone.now())
    site.report(device, PASS)
    sweep(site.satellite)
    assert state(device) == DeviceState.BURN_IN and current(device) is None
    site.report(device, PASS)
    sweep(site.satellite)
    assert state(device) == DeviceState.ACCEPTED and current(device) is not None


def test_isolation_culprits_do_not_make_their_requirement_suspect(fleet):
    """Culprit isolation names its devices because subsets of the same collective passed the same
    requirement (the known good): the evidence is the device's, not the threshold's. Three culprits of
    a requirement no device passed alone all go to repair, and the breaker stays closed (the demo's
    NVL72 domain: three trays named, the breaker opened at its minimum and the story stopped)."""
    site = Site(fleet, devices=12, breaker_share=1.0)
    moves = [
        AutomaticMove(
            d.id,
            DeviceState.NEEDS_REPAIR,
            TransitionCause.ISOLATION,
            reason="isolation: makes nvl72-nccl fail",
            refs={"requirement": "nvl72-nccl"},
        )
        for d in site.devices[:4]
    ]
    guarded = guarded_repair_moves_apply(moves)
    assert len(guarded.moved) == 4 and not guarded.held and not guarded.opened
    assert [state(d) for d in site.devices[:4]] == [DeviceState.NEEDS_REPAIR] * 4
    assert not Breaker.objects.exists()
