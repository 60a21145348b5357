"""The lifecycle's API: history, an operator's transition, repairs (which reset the failure count
and dispatch the re-burn-in), the repair queue and the circuit breakers."""

from __future__ import annotations

import pytest

from fleet.burnin.reads.failures import FailureFilters, site_failures
from fleet.burnin.reruns.service import rerun_dispatch
from fleet.events.models import Event
from fleet.inventory.models import Device
from fleet.jobs.models import Job
from fleet.jobs.services import job_finish
from fleet.lifecycle.metrics import lifecycle_gauges
from fleet.lifecycle.models import Breaker, DeviceStateChange, Repair
from fleet_rules.readable import outcome_text
from fleet_rules.vocabulary import DeviceState, EventType, JobStatus, PlanningMode, WorkflowName
from tests.burnin.certs import evaluate_now, sweep

RC = "gpu.h200.8x"
FAIL = {"diag_failed_tests": {"value": 2}}
OPERATOR = ["fleet:read", "job:create"]


class World:
    def __init__(self, fleet, devices=3, **policy):
        self.fleet = fleet
        self.site = fleet.site("lon-1")
        self.satellite = fleet.satellite(self.site, "sat-a", workflows=list(WorkflowName.values))
        self.policy = fleet.policy(RC)
        for k, v in policy.items():
            setattr(self.policy, k, v)
        self.policy.save()
        self.diag = fleet.requirement(self.policy, "gpu-diag")
        fleet.profile(RC, "dcgm-diag", {"level": 3})
        self.devices = [fleet.device(self.satellite, RC, hostname=f"n{i:02d}") for i in range(devices)]

    def fail(self, devices, times=1):
        for _ in range(times):
            for device in devices:
                evaluate_now(self.fleet.execution(self.diag, device=device, metrics=FAIL))
            sweep(self.satellite)

    def passes(self, device):
        evaluate_now(self.fleet.execution(self.diag, device=device, metrics={"diag_failed_tests": {"value": 0}}))
        sweep(self.satellite)


def state(device) -> str:
    return Device.objects.get(id=device.id).state


@pytest.fixture
def world(fleet):
    return World(fleet)


def test_the_history_lists_every_change_newest_first(world, bearer):
    world.fail(world.devices[:1], times=3)
    client = bearer(OPERATOR)
    move = client.post(
        f"/api/v1/devices/{world.devices[0].id}/transitions/", {"to": "maintenance", "reason": "RMA"}, format="json"
    )
    assert move.status_code == 200, move.content
    body = client.get(f"/api/v1/devices/{world.devices[0].id}/history/").json()
    assert [(c["from_state"], c["to_state"], c["cause"]) for c in body["results"]] == [
        ("needs_repair", "maintenance", "operator"),
        ("burn_in", "needs_repair", "failed_too_often"),
    ]
    assert body["results"][0]["actor"] == "client:automation" and body["results"][0]["reason"] == "RMA"
    assert body["results"][1]["actor"] == "system" and body["results"][1]["refs"]["failures"] == 3


def test_a_refused_transition_is_a_409_naming_the_rule_and_changes_nothing(world, bearer):
    world.fail(world.devices[:1], times=3)
    response = bearer(OPERATOR).post(
        f"/api/v1/devices/{world.devices[0].id}/transitions/", {"to": "burn_in"}, format="json"
    )
    assert response.status_code == 409
    assert "only when a repair is recorded" in response.json()["detail"]
    assert state(world.devices[0]) == DeviceState.NEEDS_REPAIR
    assert DeviceStateChange.objects.count() == 1


@pytest.mark.parametrize("body", [{"to": "nowhere"}, {"to": 3}, {}, {"to": "maintenance", "force": "yes"}])
def test_a_bad_transition_request_is_a_400_naming_the_field(world, bearer, body):
    response = bearer(OPERATOR).post(f"/api/v1/devices/{world.devices[0].id}/transitions/", body, format="json")
    assert response.status_code == 400, response.content
    assert {e["field"] for e in response.json()["field_errors"]} <= {"to", "force"}


def test_satellites_cannot_read_or_move_lifecycles(world, bearer):
    satellite = bearer(["fleet:read", "job:run"], satellite=world.satellite, name="sat-a-client")
    device = world.devices[0]
    assert satellite.get(f"/api/v1/devices/{device.id}/history/").status_code == 403
    assert satellite.get(f"/api/v1/burn-in/sites/{world.site.id}/repair-queue/").status_code == 403
    assert (
        satellite.post(f"/api/v1/devices/{device.id}/transitions/", {"to": "maintenance"}, format="json").status_code
        == 403
    )


def test_a_viewer_reads_but_does_not_move(world, session_client):
    viewer = session_client(perms=["inventory.view_device"], username="viewer")
    device = world.devices[0]
    assert viewer.get(f"/api/v1/devices/{device.id}/history/").status_code == 200
    viewer.get("/accounts/login/")
    refused = viewer.post(
        f"/api/v1/devices/{device.id}/transitions/",
        {"to": "maintenance"},
        format="json",
        HTTP_X_CSRFTOKEN=viewer.cookies["csrftoken"].value,
    )
    assert refused.status_code == 403 and state(device) == DeviceState.BURN_IN


def test_a_repair_brings_the_device_back_dispatches_its_reburn_in_and_restarts_the_count(world, bearer):
    device = world.devices[0]
    world.fail([device], times=3)
    client = bearer(OPERATOR)
    parts = [{"kind": "gpu", "slot": "3", "removed_serial": "1652", "installed_serial": "1653"}]
    response = client.post(
        f"/api/v1/devices/{device.id}/repairs/", {"summary": "swapped GPU 3", "parts": parts}, format="json"
    )
    assert response.status_code == 201, response.content
    body = response.json()
    assert body["state"] == "burn_in" and body["repair"]["parts"] == parts and body["repair"]["rerun"] == "all"
    (job,) = Job.objects.all()
    assert body["job_ids"] == [str(job.id)] and list(job.job_devices.values_list("device_id", flat=True)) == [device.id]
    repair = Repair.objects.get()
    assert DeviceStateChange.objects.filter(device=device).first().refs == {"repair": str(repair.id)}
    recorded = Event.objects.get(type=EventType.REPAIR_RECORDED)  # fleet.events: in the repair's transaction
    assert recorded.data["repair_id"] == str(repair.id) and recorded.data["job_ids"] == [str(job.id)]
    assert recorded.subject == f"sites/{world.site.slug}/devices/{device.hostname}"
    # the three failures before the repair no longer count: two more keep it in burn-in, a third sends it back
    world.fail([device], times=2)
    assert state(device) == DeviceState.BURN_IN
    attempts = client.get(
        f"/api/v1/burn-in/sites/{world.site.id}/attempts/", {"requirement": "gpu-diag", "target": str(device.id)}
    ).json()
    assert attempts["summary"]["attempts"] == 2  # the count restarted at the repair (5 runs in all)
    world.fail([device])
    assert state(device) == DeviceState.NEEDS_REPAIR
    assert client.get(f"/api/v1/devices/{device.id}/repairs/").json()["results"][0]["id"] == str(repair.id)


def test_only_a_device_in_repair_or_maintenance_is_repaired(world, bearer):
    response = bearer(OPERATOR).post(
        f"/api/v1/devices/{world.devices[0].id}/repairs/", {"summary": "nothing wrong"}, format="json"
    )
    assert response.status_code == 409 and "only a device in needs_repair or maintenance" in response.json()["detail"]
    assert not Repair.objects.exists() and not Job.objects.exists()


def test_the_repair_queue_lists_devices_oldest_first_with_why(world, bearer):
    world.fail(world.devices[1:2], times=3)
    world.fail(world.devices[0:1], times=3)
    body = bearer(OPERATOR).get(f"/api/v1/burn-in/sites/{world.site.id}/repair-queue/").json()
    assert [e["hostname"] for e in body["results"]] == ["n01", "n00"] and body["more"] is False
    first = body["results"][0]
    assert first["requirement"] == "gpu-diag" and first["failures"] == 3 and first["cause"] == "failed_too_often"
    assert first["execution_id"] is not None and "diag_failed_tests" in first["measured"]
    assert bearer(OPERATOR).get(f"/api/v1/burn-in/sites/{world.site.id}/repair-queue/?limit=0").status_code == 400


def _breaker_gauge(site) -> float | None:
    (_, breakers) = lifecycle_gauges()
    return next((s.value for s in breakers.samples if s.labels == {"site": site.slug, "resource_class": RC}), None)


def test_a_reset_breaker_stays_reset_lets_what_it_held_through_and_starts_its_window_over(fleet, bearer):
    """A reset says "I looked: the hardware really is broken". What the breaker held goes to repair
    now, the breaker stays closed (its gauge 0), and its window starts at the reset: the moves made
    before it, and those it let through, no longer count toward tripping it again."""
    world = World(fleet, devices=10, repair_after_failures=1)
    # a device passed gpu-diag: the requirement is no suspect, the failures are the hardware's and
    # the share alone guards (fleet_rules.lifecycle.breaker_decide)
    world.passes(world.devices[9])
    world.fail(world.devices[:5])  # the floor of 3 lets three through, holds two and trips
    client = bearer(OPERATOR)
    listed = client.get(f"/api/v1/burn-in/sites/{world.site.id}/breakers/").json()["results"]
    assert [(b["resource_class"], b["open"], b["held"]) for b in listed] == [(RC, True, 2)]
    assert _breaker_gauge(world.site) == 1
    (opened,) = Event.objects.filter(type=EventType.BREAKER_OPENED)
    assert opened.subject == f"sites/{world.site.slug}/breakers/{RC}" and "would go to repair" in opened.data["detail"]
    held = {str(d) for d in DeviceStateChange.objects.filter(held=True).values_list("device_id", flat=True)}
    reset = client.post(
        f"/api/v1/burn-in/sites/{world.site.id}/breakers/{RC}/reset/",
        {"reason": "the devices are broken"},
        format="json",
    )
    assert reset.status_code == 200, reset.content
    body = reset.json()
    assert body["breaker"]["open"] is False and body["breaker"]["closed_by"] == "client:automation"
    assert len(held) == 2 and set(body["moved"]) == held and body["held"] == []
    listed = client.get(f"/api/v1/burn-in/sites/{world.site.id}/breakers/").json()["results"]
    assert [b["open"] for b in listed] == [False]
    assert not Breaker.objects.filter(closed_at__isnull=True).exists() and _breaker_gauge(world.site) == 0
    (closed,) = Event.objects.filter(type=EventType.BREAKER_RESET)
    assert closed.data["reason"] == "the devices are broken" and closed.data["breaker_id"] == opened.data["breaker_id"]
    assert sum(state(d) == DeviceState.NEEDS_REPAIR for d in world.devices) == 5
    # the window starts at the reset: three more may go before a fourth trips it again
    world.fail(world.devices[5:8])
    assert sum(state(d) == DeviceState.NEEDS_REPAIR for d in world.devices) == 8
    assert not Breaker.objects.filter(closed_at__isnull=True).exists()
    world.fail(world.devices[8:9])
    assert state(world.devices[8]) == DeviceState.BURN_IN and _breaker_gauge(world.site) == 1
    last = client.post(f"/api/v1/burn-in/sites/{world.site.id}/breakers/{RC}/reset/", {"reason": "y"}, format="json")
    assert last.status_code == 200 and last.json()["moved"] == [str(world.devices[8].id)]
    gone = client.post(f"/api/v1/burn-in/sites/{world.site.id}/breakers/{RC}/reset/", {"reason": "z"}, format="json")
    assert gone.status_code == 404  # none open


def test_the_failures_list_counts_attempts_since_the_repair(world, bearer):
    device = world.devices[0]
    client = bearer(OPERATOR)

    def fail_in_a_job(times: int) -> None:
        sweep(world.satellite)  # the projection's rows, which planning reads
        (job,) = rerun_dispatch(
            site=world.site, device_ids=[device.id], mode=PlanningMode.ALL, requested_by="test"
        ).created_jobs
        for _ in range(times):
            execution = world.fleet.execution(
                world.diag, device=device, metrics=FAIL, job=Job.objects.get(id=job.job_id)
            )
            evaluate_now(execution)
            sweep(world.satellite)
        job_finish(job_id=job.job_id, outcome=JobStatus.SUCCEEDED)

    fail_in_a_job(3)
    assert state(device) == DeviceState.NEEDS_REPAIR
    assert [f.attempts for f in site_failures(world.site, FailureFilters(), order="target", limit=10)[0]] == [3]
    repaired = client.post(f"/api/v1/devices/{device.id}/repairs/", {"summary": "reseated"}, format="json")
    assert repaired.status_code == 201
    for job_id in repaired.json()["job_ids"]:
        job_finish(job_id=job_id, outcome=JobStatus.CANCELLED)
    fail_in_a_job(2)
    assert [f.attempts for f in site_failures(world.site, FailureFilters(), order="target", limit=10)[0]] == [2]


def test_the_repair_queue_s_reason_for_failing_too_often_says_what_was_measured_against_what(fleet, bearer):
    """The reason an operator reads names the measurement that failed beside the count, in the words
    the failures list uses for the same execution (`busbw_gbps 377.75 GB/s is below ≥ 420 GB/s`)."""
    site = fleet.site("lon-1")
    satellite = fleet.satellite(site, "sat-a", workflows=list(WorkflowName.values))
    nccl = fleet.requirement(
        fleet.policy(RC),
        "nccl-in-node",
        test="nccl-all-reduce",
        thresholds=[{"metric": "busbw_gbps", "comparator": "gte", "threshold": 420}],
    )
    device = fleet.device(satellite, RC, hostname="n00")
    for _ in range(3):
        evaluate_now(fleet.execution(nccl, device=device, metrics={"busbw_gbps": {"value": 377.75, "unit": "GB/s"}}))
        sweep(satellite)
    (queued,) = bearer(OPERATOR).get(f"/api/v1/burn-in/sites/{site.id}/repair-queue/").json()["results"]
    (failure,), _ = site_failures(site, FailureFilters())
    (rule,) = failure.rules
    said = outcome_text(rule, failure.units[rule.metric])
    assert said == "busbw_gbps 377.75 GB/s is below ≥ 420 GB/s (−10.1 %)"
    assert queued["cause"] == "failed_too_often" and queued["reason"].startswith("nccl-in-node failed 3 times")
    assert said in queued["reason"], queued["reason"]
