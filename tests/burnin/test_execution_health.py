"""Health evidence on the execution report (issue 29): validated strictly, stored with the execution,
and a fatal Xid moves the device to needs_repair in the report's transaction, behind the breaker."""

from __future__ import annotations

import uuid

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from fleet.burnin.models import RemedyStep, TestExecution
from fleet.inventory.models import Device
from fleet.lifecycle.models import Breaker, DeviceStateChange
from fleet.repairs.services import breaker_reset
from fleet_rules.vocabulary import DeviceState, TransitionCause

URL = "/api/v1/burn-in/executions/{}/"
RC = "gpu.h200.8x"
HEALTH_RULES = [
    {"metric": "xid_fatal_count", "comparator": "eq", "threshold": 0},
    {"metric": "ecc_uncorrected_delta", "comparator": "eq", "threshold": 0},
]
PASSING = {
    "xid_count": {"value": 1},
    "xid_fatal_count": {"value": 0},
    "ecc_uncorrected_delta": {"value": 0},
    "hw_slowdown_seen": {"value": 0},
}


@pytest.fixture
def setting(fleet):
    site = fleet.site("lon-1")
    satellite = fleet.satellite(site, "sat-a")
    rack = fleet.topology(satellite, "rack", "rack-a01")
    device = fleet.device(satellite, RC, hostname="a01-n00", topologies=[rack])
    policy = fleet.policy(RC)
    health = fleet.requirement(policy, "gpu-health-window", test="health-window", thresholds=HEALTH_RULES)
    fleet.requirement(policy, "rack-nccl", scope="multi_node", unit="rack", test="nccl-multi")
    return device, rack, health


def event(code: int = 79, **overrides) -> dict:
    return {
        "kind": "xid",
        "code": code,
        "pci_bus_id": "0000:3b:00",
        "message": "GPU has fallen off the bus.",
        "at": "2026-11-30T10:12:00Z",
    } | overrides


def health(*events: dict, **overrides) -> dict:
    return {
        "window": {"since": "2026-11-30T10:00:00Z", "until": "2026-11-30T10:30:00Z"},
        "source": "journalctl",
        "xid_events": list(events),
        "ecc": {
            "before": {"ecc_uncorrected_aggregate": 2, "row_remap_pending": 0},
            "after": {"ecc_uncorrected_aggregate": 2, "row_remap_pending": None},
        },
        "throttle_reasons_seen": ["sw_thermal_slowdown"],
    } | overrides


def report(device, health_object=None, **overrides) -> dict:
    body = {
        "requirement": "gpu-health-window",
        "device_id": str(device.id),
        "status": "completed",
        "metrics": PASSING,
        "started_at": "2026-11-30T10:00:00Z",
        "finished_at": "2026-11-30T10:30:00Z",
    }
    if health_object is not None:
        body["health"] = health_object
    return body | overrides


def state_of(device) -> str:
    return Device.objects.get(id=device.id).state


# --- storage ---------------------------------------------------------------------------------------


def test_health_is_stored_with_the_execution_and_read_back(bearer, setting):
    device, _, _ = setting
    client = bearer(["test-execution:report"])
    execution_id = uuid.uuid4()
    sent = health(
        event(13, message="Graphics Exception"),
        event(31, pci_bus_id="00000000:3B:00.0", at=None),
        event(43, pci_bus_id="0000:3b:00 gpu-i:05"),  # whatever the driver wrote: kept, shown escaped
    )
    created = client.put(URL.format(execution_id), report(device, sent), format="json")
    assert created.status_code == 201, created.content
    stored = TestExecution.objects.get(id=execution_id)
    assert stored.health["xid_events"][1] == {
        "kind": "xid",
        "code": 31,
        "pci_bus_id": "00000000:3B:00.0",
        "message": "GPU has fallen off the bus.",
        "at": None,
    }
    assert stored.health["window"] == {"since": "2026-11-30T10:00:00Z", "until": "2026-11-30T10:30:00Z"}
    assert stored.health["ecc"]["after"] == {"ecc_uncorrected_aggregate": 2, "row_remap_pending": None}
    assert stored.health["xid_events"][2]["pci_bus_id"] == "0000:3b:00 gpu-i:05"
    assert stored.fatal_xids == 0
    read = bearer(["fleet:read"], name="reader").get(URL.format(execution_id)).json()
    assert read["health"] == created.json()["health"] == stored.health


def test_executions_without_health_read_null(bearer, setting):
    device, _, _ = setting
    response = bearer(["test-execution:report"]).put(URL.format(uuid.uuid4()), report(device), format="json")
    assert response.status_code == 201 and response.json()["health"] is None


def test_a_report_without_health_keeps_the_stored_evidence_and_a_replay_changes_nothing(bearer, setting):
    device, _, _ = setting
    client = bearer(["test-execution:report"])
    execution_id = uuid.uuid4()
    first = client.put(URL.format(execution_id), report(device, health(event(13))), format="json").json()
    replay = client.put(URL.format(execution_id), report(device, health(event(13))), format="json").json()
    without = client.put(URL.format(execution_id), report(device), format="json").json()
    assert first["updated_at"] == replay["updated_at"] == without["updated_at"]
    assert without["health"]["xid_events"][0]["code"] == 13
    newer = client.put(URL.format(execution_id), report(device, health(event(13), event(43))), format="json").json()
    assert newer["updated_at"] > first["updated_at"] and len(newer["health"]["xid_events"]) == 2


# --- validation: 400 naming the field, nothing written ------------------------------------------------


def _events(n: int) -> list[dict]:
    return [event(13) for _ in range(n)]


@pytest.mark.parametrize(
    ("health_object", "field"),
    [
        ([], "health"),
        (health(event(code="79")), "health.xid_events.0.code"),
        (health(event(code=79.0)), "health.xid_events.0.code"),
        (health(event(code=-1)), "health.xid_events.0.code"),
        (health(event(code=2**31)), "health.xid_events.0.code"),
        (health(event(kind="gpu")), "health.xid_events.0.kind"),
        (health(event(13), event(pci_bus_id="0000:3b:00\n79")), "health.xid_events.1.pci_bus_id"),
        (health(event(pci_bus_id="0" * 65)), "health.xid_events.0.pci_bus_id"),
        (health(event(pci_bus_id="")), "health.xid_events.0.pci_bus_id"),
        (health(event(message="x" * 1001)), "health.xid_events.0.message"),
        (health(event(message=7)), "health.xid_events.0.message"),
        (health(event(at="yesterday")), "health.xid_events.0.at"),
        (health(*_events(1001)), "health.xid_events"),
        (health(xid_events={"code": 79}), "health.xid_events"),
        (health(source="syslog"), "health.source"),
        (health(window={"since": "2026-11-30T10:00:00Z"}), "health.window.until"),
        (health(window={"since": "2026-11-30T10:00:00Z", "until": "2026-11-30T09:00:00Z"}), "health.window.until"),
        (health(throttle_reasons_seen=["fan_slow"]), "health.throttle_reasons_seen.0"),
        (health(throttle_reasons_seen=["hw_slowdown", "hw_slowdown"]), "health.throttle_reasons_seen"),
        (health(ecc={"before": {"ECC; DROP TABLE": 1}}), "health.ecc.before"),
        (health(ecc={"after": {"ecc_uncorrected_aggregate": "many"}}), "health.ecc.after.ecc_uncorrected_aggregate"),
        (health(ecc={"after": {f"c{i}": 0 for i in range(65)}}), "health.ecc.after"),
    ],
)
def test_bad_health_names_the_field_and_writes_nothing(bearer, setting, health_object, field):
    device, _, _ = setting
    # a fatal event beside the bad one: a refused report moves nothing either
    if isinstance(health_object, dict) and isinstance(health_object.get("xid_events"), list):
        health_object["xid_events"] = [*health_object["xid_events"], event(79)]
    response = bearer(["test-execution:report"]).put(
        URL.format(uuid.uuid4()), report(device, health_object), format="json"
    )
    assert response.status_code == 400, response.content
    assert field in {e["field"] for e in response.json()["field_errors"]}, response.json()
    assert TestExecution.objects.count() == 0
    assert state_of(device) == DeviceState.BURN_IN and not DeviceStateChange.objects.exists()


def test_nul_characters_in_a_message_are_refused_by_name(bearer, setting):
    device, _, _ = setting
    response = bearer(["test-execution:report"]).put(
        URL.format(uuid.uuid4()), report(device, health(event(message="bus\x00gone"))), format="json"
    )
    assert response.status_code == 400
    assert "health.xid_events.0.message" in response.content.decode()
    assert TestExecution.objects.count() == 0 and state_of(device) == DeviceState.BURN_IN


def test_health_is_refused_on_a_topology_execution(bearer, setting):
    _, rack, _ = setting
    body = {"requirement": "rack-nccl", "topology_id": str(rack.id), "status": "running", "health": health(event(79))}
    response = bearer(["test-execution:report"]).put(URL.format(uuid.uuid4()), body, format="json")
    assert response.status_code == 400
    assert [e["field"] for e in response.json()["field_errors"]] == ["health"]
    assert TestExecution.objects.count() == 0


def test_an_update_refused_by_the_service_stores_no_health_and_moves_nothing(bearer, setting):
    device, _, _ = setting
    client = bearer(["test-execution:report"])
    execution_id = uuid.uuid4()
    client.put(URL.format(execution_id), report(device, status="running", finished_at=None), format="json")
    refused = client.put(
        URL.format(execution_id), report(device, health(event(79)), job_id=str(uuid.uuid4())), format="json"
    )
    assert refused.status_code == 400 and refused.json()["field_errors"][0]["field"] == "job_id"
    stored = TestExecution.objects.get(id=execution_id)
    assert stored.health is None and stored.status == "running"
    assert state_of(device) == DeviceState.BURN_IN and not DeviceStateChange.objects.exists()


# --- an Xid the catalogue says a person must act on moves the device to repair (docs/remediation.md) -----
# Xid 54 ("auxiliary power is not connected to the GPU board": CHECK_MECHANICALS) is such a code; 79 and 95 ask
# for a step of the ladder first (tests/burnin/test_remedy_ladder.py).


def test_an_xid_a_person_must_act_on_moves_the_device_to_repair_at_once_though_every_number_passed(bearer, setting):
    device, _, _ = setting
    execution_id = uuid.uuid4()
    sent = health(event(13, at="2026-11-30T10:05:00Z"), event(54), event(48, pci_bus_id="0000:5e:00"))
    response = bearer(["test-execution:report"]).put(URL.format(execution_id), report(device, sent), format="json")
    assert response.status_code == 201, response.content
    assert state_of(device) == DeviceState.NEEDS_REPAIR
    (change,) = DeviceStateChange.objects.filter(device=device)
    assert (change.from_state, change.to_state, change.cause, change.held, change.actor) == (
        DeviceState.BURN_IN,
        DeviceState.NEEDS_REPAIR,
        TransitionCause.FATAL_XID,
        False,
        "system",
    )
    assert change.reason == (
        "Xid 54 (Auxiliary power is not connected to the GPU board) on GPU 0000:3b:00: repair asked; "
        "Xid 48 (Double Bit ECC Error) on GPU 0000:5e:00: GPU reset asked; "
        "Xid 13 (Graphics Engine Exception) on GPU 0000:3b:00: application restart asked during its burn-in"
    )
    assert change.refs["execution"] == str(execution_id)
    assert change.refs["xid"] == {"kind": "xid", "code": 54, "pci_bus_id": "0000:3b:00", "at": "2026-11-30T10:12:00Z"}
    assert change.refs["ladder"] == []
    assert TestExecution.objects.get(id=execution_id).fatal_xids == 1  # 48: the window's requirement fails on it


def test_a_replayed_fatal_report_writes_no_second_history_entry(bearer, setting):
    device, _, _ = setting
    client = bearer(["test-execution:report"])
    execution_id = uuid.uuid4()
    for _ in range(2):
        client.put(URL.format(execution_id), report(device, health(event(54))), format="json")
    assert DeviceStateChange.objects.filter(device=device).count() == 1


def test_fatal_evidence_arriving_with_the_final_report_moves_the_device(bearer, setting):
    device, _, _ = setting
    client = bearer(["test-execution:report"])
    execution_id = uuid.uuid4()
    client.put(URL.format(execution_id), report(device, status="running", finished_at=None), format="json")
    assert state_of(device) == DeviceState.BURN_IN
    client.put(URL.format(execution_id), report(device, health(event(54))), format="json")
    assert state_of(device) == DeviceState.NEEDS_REPAIR
    assert "Xid 54 (Auxiliary power is not connected" in DeviceStateChange.objects.get(device=device).reason


def test_an_sxid_fatal_to_the_fabric_asks_for_a_reboot_not_a_repair(bearer, setting):
    device, _, _ = setting
    sent = health(event(12020, kind="sxid", pci_bus_id="0000:05:00.0", message="Fatal, egress"))
    bearer(["test-execution:report"]).put(URL.format(uuid.uuid4()), report(device, sent), format="json")
    assert state_of(device) == DeviceState.BURN_IN and not DeviceStateChange.objects.exists()
    (step,) = RemedyStep.objects.filter(device=device)
    assert (step.step, step.outcome) == ("reboot", "under_way")
    assert step.reason == "SXid 12020 (egress sequence ID error) on GPU 0000:05:00.0: reboot asked"


@pytest.mark.parametrize("code", [13, 31, 43, 45, 94])
def test_an_xid_the_application_causes_moves_nothing(bearer, setting, code):
    device, _, _ = setting
    response = bearer(["test-execution:report"]).put(
        URL.format(uuid.uuid4()), report(device, health(event(code))), format="json"
    )
    assert response.status_code == 201
    assert state_of(device) == DeviceState.BURN_IN and not DeviceStateChange.objects.exists()


def test_an_accepted_device_goes_to_repair_and_one_in_service_stays(bearer, setting, fleet):
    device, _, _ = setting
    Device.objects.filter(id=device.id).update(state=DeviceState.ACCEPTED)
    in_service = fleet.device(device.satellite, RC, hostname="a01-n01", state=DeviceState.IN_SERVICE)
    client = bearer(["test-execution:report"])
    for target in (device, in_service):
        assert client.put(URL.format(uuid.uuid4()), report(target, health(event(79))), format="json").status_code == 201
    assert state_of(device) == DeviceState.NEEDS_REPAIR
    assert DeviceStateChange.objects.get(device=device).from_state == DeviceState.ACCEPTED
    assert state_of(in_service) == DeviceState.IN_SERVICE
    assert not DeviceStateChange.objects.filter(device=in_service).exists()
    assert TestExecution.objects.get(device=in_service).fatal_xids == 1  # the device page flags it


def test_the_open_breaker_holds_the_move_and_closing_it_lets_it_through(bearer, setting):
    device, _, _ = setting
    Breaker.objects.create(site=device.site, resource_class=RC, opened_at=device.enrolled_at, detail="tripped earlier")
    response = bearer(["test-execution:report"]).put(
        URL.format(uuid.uuid4()), report(device, health(event(54))), format="json"
    )
    assert response.status_code == 201
    assert state_of(device) == DeviceState.BURN_IN
    (held,) = DeviceStateChange.objects.filter(device=device)
    assert held.held and held.cause == TransitionCause.HELD_BY_BREAKER
    assert held.refs["held_cause"] == TransitionCause.FATAL_XID and "Xid 54" in held.reason

    reset = breaker_reset(site=device.site, resource_class=RC, actor="user:alice", reason="driver fixed")
    assert [m.device_id for m in reset.rejudged.moved] == [device.id]
    assert state_of(device) == DeviceState.NEEDS_REPAIR
    moved = DeviceStateChange.objects.get(device=device, held=False)
    assert moved.cause == TransitionCause.FATAL_XID and "Xid 54" in moved.reason
    assert "held_cause" not in moved.refs


def test_fatal_xids_count_toward_the_breaker(bearer, setting, fleet):
    device, _, _ = setting
    others = [fleet.device(device.satellite, RC, hostname=f"a01-n{i:02d}") for i in range(1, 5)]
    client = bearer(["test-execution:report"])
    for target in [device, *others]:
        client.put(URL.format(uuid.uuid4()), report(target, health(event(54))), format="json")
    states = sorted(Device.objects.filter(site=device.site).values_list("state", flat=True))
    # five devices enrolled: the breaker's floor of 3 lets three go, holds the rest and opens
    assert states.count(DeviceState.NEEDS_REPAIR) == 3 and states.count(DeviceState.BURN_IN) == 2
    assert Breaker.objects.filter(site=device.site, closed_at__isnull=True).exists()


# --- repair queue -------------------------------------------------------------------------------------


def test_the_repair_queue_says_which_xid_sent_the_device(bearer, setting):
    device, _, _ = setting
    execution_id = uuid.uuid4()
    bearer(["test-execution:report"]).put(URL.format(execution_id), report(device, health(event(54))), format="json")
    queue = bearer(["fleet:read"], name="reader").get(f"/api/v1/burn-in/sites/{device.site_id}/repair-queue/")
    assert queue.status_code == 200, queue.content
    (entry,) = queue.json()["results"]
    assert entry["cause"] == "fatal_xid"
    assert entry["reason"].startswith("Xid 54 (Auxiliary power is not connected to the GPU board) on GPU 0000:3b:00")
    assert entry["execution_id"] == str(execution_id)


# --- bounded: the report costs the same queries whatever it carries ------------------------------


def test_the_report_path_costs_the_same_queries_for_few_and_many_events(bearer, setting, fleet):
    device, _, _ = setting
    other = fleet.device(device.satellite, RC, hostname="a01-n09")
    client = bearer(["test-execution:report"])

    def queries(target, events: list[dict]) -> int:
        with CaptureQueriesContext(connection) as captured:
            response = client.put(URL.format(uuid.uuid4()), report(target, health(*events)), format="json")
        assert response.status_code == 201, response.content
        return len(captured)

    few = queries(device, [event(13), event(54)])
    many = queries(other, [*_events(900), *[event(54, pci_bus_id=f"0000:{i:02x}:00") for i in range(99)]])
    assert few == many
    assert state_of(device) == state_of(other) == DeviceState.NEEDS_REPAIR
