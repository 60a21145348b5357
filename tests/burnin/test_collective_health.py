"""A multi-node execution's member windows (`member_health`, docs/remediation.md): judged together when the
execution finishes. A code most of the job's devices logged is the workload's (the execution is errored, no device
moves, no step asked); fewer devices than a burst take each device's ladder, as a single-node window does."""

from __future__ import annotations

import uuid

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from fleet.burnin.models import RemedyStep, TestExecution
from fleet.lifecycle.models import DeviceStateChange
from tests.burnin.test_execution_health import HEALTH_RULES, RC, URL, event, health, report
from tests.payloads import rack_collective

pytestmark = pytest.mark.django_db


@pytest.fixture
def satellite(fleet):
    site = fleet.site("lon-1")
    satellite = fleet.satellite(site, "sat-a")
    policy = fleet.policy(RC)
    fleet.requirement(policy, "gpu-health-window", test="health-window", thresholds=HEALTH_RULES)
    fleet.requirement(policy, "rack-nccl", scope="multi_node", unit="rack", test="nccl-multi")
    return satellite


def _rack(fleet, satellite, size: int, label: str = "rack-a01"):
    rack = fleet.topology(satellite, "rack", label)
    devices = [fleet.device(satellite, RC, hostname=f"{label[-3:]}-n{i:02d}", topologies=[rack]) for i in range(size)]
    return rack, devices


@pytest.fixture
def reporter(bearer):
    return bearer(["test-execution:report"])


def test_a_code_on_most_of_the_racks_devices_is_the_workloads_no_device_moves(reporter, fleet, satellite):
    rack, devices = _rack(fleet, satellite, 4)
    members = {d: health(event(13, message="Graphics Engine Exception")) for d in devices[:3]} | {devices[3]: health()}
    execution_id = uuid.uuid4()
    response = reporter.put(URL.format(execution_id), rack_collective(rack, members), format="json")
    assert response.status_code == 201, response.content

    execution = TestExecution.objects.get(id=execution_id)
    assert (execution.status, execution.error) == ("errored", "the workload crashed on 3 devices (Xid 13)")
    assert not RemedyStep.objects.exists() and not DeviceStateChange.objects.exists()
    replay = reporter.put(URL.format(execution_id), rack_collective(rack, members), format="json")
    assert replay.status_code == 200 and replay.json()["updated_at"] == response.json()["updated_at"]


def test_fewer_devices_than_a_burst_take_each_devices_ladder(reporter, fleet, satellite):
    rack, devices = _rack(fleet, satellite, 4)
    for device in devices:  # their single-node burn-in, clean: what a step's job runs again
        assert reporter.put(URL.format(uuid.uuid4()), report(device, health()), format="json").status_code == 201
    members = {d: health(event(95, at="2026-11-30T10:12:00Z")) for d in devices[:2]} | {
        d: health() for d in devices[2:]
    }
    execution_id = uuid.uuid4()
    response = reporter.put(URL.format(execution_id), rack_collective(rack, members), format="json")
    assert response.status_code == 201, response.content

    assert TestExecution.objects.get(id=execution_id).status == "completed"  # 2 of 4: not the workload's
    steps = RemedyStep.objects.order_by("device__hostname")
    assert [(s.device_id, s.step, s.outcome, s.asked_by_id) for s in steps] == [
        (d.id, "reset_gpu", "under_way", execution_id) for d in devices[:2]
    ]
    assert steps[0].reason == "Xid 95 (Uncontained memory error) on GPU 0000:3b:00: GPU reset asked"
    # the collective cannot run on one node: the step's job is the device's single-node burn-in, step first
    assert [s.job.requirement_names for s in steps] == [["gpu-health-window"]] * 2
    assert all(s.job.parameters["remedy"]["step"] == "reset_gpu" for s in steps)
    assert not DeviceStateChange.objects.exists()


def test_a_running_report_judges_nothing(reporter, fleet, satellite):
    rack, devices = _rack(fleet, satellite, 4)
    members = {d: health(event(13)) for d in devices}
    body = rack_collective(rack, members, status="running", finished_at=None)
    assert reporter.put(URL.format(uuid.uuid4()), body, format="json").status_code == 201
    assert TestExecution.objects.get().status == "running"


@pytest.mark.parametrize(
    ("change", "field"),
    [
        (lambda body, rack, devices, other: body | {"member_health": [
            {"device_id": str(other.id), "health": health()}]}, "member_health"),
        (lambda body, rack, devices, other: body | {"member_health": body["member_health"] * 2}, "member_health"),
        (lambda body, rack, devices, other: body | {"member_health": [
            {"device_id": str(devices[0].id), "health": health(event(message="bus\x00gone"))}]},
         "member_health.0.health.xid_events.0.message"),
        (lambda body, rack, devices, other: body | {"member_health": [{"device_id": str(devices[0].id)}]},
         "member_health.0.health"),
        (lambda body, rack, devices, other: {k: v for k, v in body.items() if k != "topology_id"}
         | {"requirement": "gpu-health-window", "device_id": str(devices[0].id)}, "member_health"),
    ],
    ids=["a-stranger", "twice", "hostile-text", "no-health", "on-a-device"],
)  # fmt: skip
def test_bad_member_health_is_refused_by_name_and_writes_nothing(reporter, fleet, satellite, change, field):
    rack, devices = _rack(fleet, satellite, 4)
    _, others = _rack(fleet, satellite, 1, "rack-a02")
    body = change(rack_collective(rack, {devices[0]: health(event(13))}), rack, devices, others[0])
    response = reporter.put(URL.format(uuid.uuid4()), body, format="json")
    assert response.status_code == 400, response.content
    assert field in [e["field"] for e in response.json()["field_errors"]]
    assert not TestExecution.objects.exists() and not RemedyStep.objects.exists()


def test_a_burst_costs_the_same_statements_on_a_rack_of_4_and_of_16(reporter, fleet, satellite):
    counts = []
    for size, label in ((4, "rack-a01"), (16, "rack-b01")):
        rack, devices = _rack(fleet, satellite, size, label)
        members = {d: health(event(13)) for d in devices}
        with CaptureQueriesContext(connection) as queries:
            response = reporter.put(URL.format(uuid.uuid4()), rack_collective(rack, members), format="json")
        assert response.status_code == 201 and response.json()["status"] == "errored"
        counts.append(len(queries))
    assert counts[0] == counts[1], counts
