"""Hardware fingerprints on the service: the execution report's `inventory` validated and kept as
snapshots (a new row only when the hash moves), bound into certificates, a changed one superseding
the certificate (`hardware_changed`) through the lifecycle, and checked against repairs."""

from __future__ import annotations

import copy
import json
import uuid

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from fleet.burnin.certificates.verify import verify_one
from fleet.burnin.fingerprints import Observation, fingerprint_history, fingerprint_observe
from fleet.burnin.models import AcceptanceCertificate, FingerprintSnapshot, TestExecution
from fleet.inventory.models import Device
from fleet.lifecycle.models import DeviceStateChange
from fleet_rules import fingerprint as rules
from fleet_rules.vocabulary import DeviceState, SupersedeReason, TransitionCause
from tests.burnin.certs import current, evaluate_now, sweep
from tests.payloads import inventory

URL = "/api/v1/burn-in/executions/{}/"
RC = "gpu.h200.8x"
GOOD = {"diag_failed_tests": {"value": 0}}


def swapped(value: dict, index: int = 3, serial: str = "1653020000003") -> dict:
    changed = copy.deepcopy(value)
    changed["gpus"][index]["serial"] = serial
    return changed


@pytest.fixture
def setting(fleet):
    site = fleet.site("lon-1")
    satellite = fleet.satellite(site, "sat-a")
    rack = fleet.topology(satellite, "rack", "rack-a01")
    device = fleet.device(satellite, RC, hostname="a01-n01", topologies=[rack])
    policy = fleet.policy(RC)
    diag = fleet.requirement(policy, "gpu-diag", test="dcgm-diag")
    return site, satellite, rack, device, policy, diag


def body(device, **overrides):
    data = {
        "requirement": "gpu-diag",
        "device_id": str(device.id),
        "status": "running",
        "started_at": "2026-11-30T10:00:00Z",
        "inventory": inventory(),
    }
    return data | overrides


# --- ingest ---------------------------------------------------------------------------------------


def test_a_new_snapshot_only_when_the_hash_moves(bearer, setting):
    *_, device, _, _ = setting
    client = bearer(["test-execution:report"])
    # Given three executions reporting one inventory, one of them twice
    ids = [uuid.uuid4() for _ in range(3)]
    for execution_id in [*ids, ids[0]]:
        response = client.put(URL.format(execution_id), body(device), format="json")
        assert response.status_code in (200, 201), response.content
    # Then one snapshot, seen by four reports, naming the first and the last execution
    (snapshot,) = FingerprintSnapshot.objects.filter(device=device)
    assert snapshot.sha256 == rules.sha256(inventory())
    assert snapshot.canonical.encode() == rules.canonical(inventory())
    assert (snapshot.reports, snapshot.first_execution_id, snapshot.last_execution_id) == (4, ids[0], ids[0])
    assert snapshot.replaced_at is None
    assert set(TestExecution.objects.values_list("fingerprint_sha256", flat=True)) == {snapshot.sha256}

    # When a GPU is swapped, then swapped back
    client.put(URL.format(uuid.uuid4()), body(device, inventory=swapped(inventory())), format="json")
    client.put(URL.format(uuid.uuid4()), body(device, inventory=inventory()), format="json")
    # Then two more rows, the newest current, each telling what changed
    history = fingerprint_history(device.id).fingerprints
    assert [s.current for s in history] == [True, False, False]
    assert [[c.text for c in s.changes] for s in history] == [
        ["GPU 3 (00000000:48:00.0) serial 1653020000003 → 1652020000003"],
        ["GPU 3 (00000000:48:00.0) serial 1652020000003 → 1653020000003"],
        [],
    ]
    assert history[-1].first


def test_a_fingerprint_does_not_move_an_executions_updated_at(bearer, setting):
    *_, device, _, _ = setting
    client = bearer(["test-execution:report"])
    execution_id = uuid.uuid4()
    first = client.put(URL.format(execution_id), body(device, inventory=None), format="json").json()
    again = client.put(URL.format(execution_id), body(device), format="json").json()
    assert again["updated_at"] == first["updated_at"]
    assert TestExecution.objects.get(id=execution_id).fingerprint_sha256 == rules.sha256(inventory())


def _too_many_gpus():
    return inventory(gpus=65)


@pytest.mark.parametrize(
    ("inventory_value", "field"),
    [
        (_too_many_gpus(), "inventory.gpus"),
        (
            inventory(
                hcas=[
                    {"name": f"mlx5_{i}", "firmware_version": None, "node_guid": None, "ports": []} for i in range(33)
                ]
            ),
            "inventory.hcas",
        ),
        (inventory(driver_version="5" * 65), "inventory.driver_version"),
        (inventory(driver_version=550), "inventory.driver_version"),
        (inventory(driver_version=""), "inventory.driver_version"),
        (inventory(host={"bios_version": "1.0\n<script>", "system_serial": None}), "inventory.host.bios_version"),
        (inventory(host={"bios_version": "1.0", "system_serial": None, "chassis": "x"}), "inventory.host.chassis"),
        (inventory(missing=["x" * 501]), "inventory.missing.0"),
        (inventory() | {"gpus": [{"serial": "1"}]}, "inventory.gpus.0.uuid"),
        ({"driver_version": None}, "inventory.cuda_version"),
        ([], "inventory"),
        (inventory() | {"gpus": [inventory()["gpus"][0]] * 2}, "inventory.gpus.1.pci_bus_id"),
        (
            inventory(
                hcas=[
                    {
                        "name": "mlx5_0",
                        "firmware_version": None,
                        "node_guid": None,
                        "ports": [{"port": 0, "state": None, "rate_gbps": None}],
                    }
                ]
            ),
            "inventory.hcas.0.ports.0.port",
        ),
        (
            inventory(
                hcas=[
                    {
                        "name": "mlx5_0",
                        "firmware_version": None,
                        "node_guid": None,
                        "ports": [{"port": 1, "state": None, "rate_gbps": -1}],
                    }
                ]
            ),
            "inventory.hcas.0.ports.0.rate_gbps",
        ),
    ],
)
def test_a_bad_inventory_is_a_400_naming_the_field_and_writes_nothing(bearer, setting, inventory_value, field):
    *_, device, _, _ = setting
    client = bearer(["test-execution:report"])
    response = client.put(URL.format(uuid.uuid4()), body(device, inventory=inventory_value), format="json")
    assert response.status_code == 400, response.content
    fields = {f["field"] for f in response.json()["field_errors"]}
    assert field in fields, fields
    assert not TestExecution.objects.exists()
    assert not FingerprintSnapshot.objects.exists()


def test_a_nul_in_an_inventory_is_refused(bearer, setting):
    *_, device, _, _ = setting
    client = bearer(["test-execution:report"])
    raw = body(device, inventory=inventory(host={"bios_version": "1.0\x00", "system_serial": None}))
    response = client.put(URL.format(uuid.uuid4()), raw, format="json")
    assert response.status_code == 400
    assert "NUL" in response.json()["detail"] or "null" in str(response.json()).lower()
    assert not FingerprintSnapshot.objects.exists()


def test_a_nul_in_a_gpu_serial_is_a_400_naming_the_field(bearer, setting):
    """Issue 42 (7): the refusal was right but named no field, unlike every other bad value."""
    *_, device, _, _ = setting
    value = inventory()
    value["gpus"][2]["serial"] = "1652\x000200"
    response = bearer(["test-execution:report"]).put(
        URL.format(uuid.uuid4()), body(device, inventory=value), format="json"
    )
    assert response.status_code == 400, response.content
    assert response.json()["field_errors"] == [
        {"field": "inventory.gpus.2.serial", "messages": ["NUL characters are not allowed."]}
    ], response.json()
    assert not TestExecution.objects.exists() and not FingerprintSnapshot.objects.exists()


def test_a_topology_execution_with_an_inventory_is_refused(bearer, setting):
    _, _, rack, device, policy, _ = setting
    from tests.builders import FleetBuilder

    FleetBuilder().requirement(policy, "rack-nccl", scope="multi_node", unit="rack", test="nccl-multi")
    client = bearer(["test-execution:report"])
    response = client.put(
        URL.format(uuid.uuid4()),
        body(device, requirement="rack-nccl", device_id=None, topology_id=str(rack.id)),
        format="json",
    )
    assert response.status_code == 400
    assert [f["field"] for f in response.json()["field_errors"]] == ["inventory"]
    assert not TestExecution.objects.exists()


def _report_queries(fleet, diag, device, value) -> int:
    fleet.execution(diag, device=device, status="running", inventory=value)  # the first snapshot
    with CaptureQueriesContext(connection) as seen:
        fleet.execution(diag, device=device, status="running", inventory=value)
    return len(seen.captured_queries)


def _change_queries(fleet, diag, device, value) -> int:
    with CaptureQueriesContext(connection) as seen:
        fleet.execution(diag, device=device, status="running", inventory=swapped(value, index=1))
    return len(seen.captured_queries)


def test_a_report_seen_again_is_one_statement_and_takes_no_lock(fleet, setting):
    """The common report (the device's current fingerprint again) is counted by one UPDATE; the
    device's lock is for a fingerprint that moved."""
    _, _, _, small, _, diag = setting
    fleet.execution(diag, device=small, status="running", inventory=inventory())
    again = fleet.execution(diag, device=small, status="running")
    with CaptureQueriesContext(connection) as seen:
        observed = fingerprint_observe(Observation.of(small.id, inventory(), again.id), now=timezone.now())
    assert observed.created is False and observed.sha256 == rules.sha256(inventory())
    assert len(seen.captured_queries) == 1, [q["sql"] for q in seen.captured_queries]
    assert seen.captured_queries[0]["sql"].startswith("UPDATE")
    snapshot = FingerprintSnapshot.objects.get(device=small, replaced_at__isnull=True)
    assert (snapshot.reports, snapshot.last_execution_id) == (2, again.id)


def test_a_report_takes_the_same_queries_for_8_and_64_gpus(fleet, setting):
    _, satellite, _, small, _, diag = setting
    large = fleet.device(satellite, RC, hostname="a01-n02")
    assert _report_queries(fleet, diag, small, inventory(gpus=8)) == _report_queries(
        fleet, diag, large, inventory(gpus=64)
    )
    assert _change_queries(fleet, diag, small, inventory(gpus=8)) == _change_queries(
        fleet, diag, large, inventory(gpus=64)
    )


# --- certificates ---------------------------------------------------------------------------------


def _certified(fleet, diag, device, value=None):
    """The device passes its one requirement, reporting `value`, and a sweep certifies it."""
    x = fleet.execution(diag, device=device, metrics=GOOD, inventory=value if value is not None else inventory())
    evaluate_now(x)
    sweep(device.satellite, RC)
    device.refresh_from_db()
    return current(device)


def test_a_certificate_binds_the_fingerprint_and_still_verifies(fleet, setting):
    *_, device, _, diag = setting
    certificate = _certified(fleet, diag, device)
    assert certificate is not None
    bound = certificate.document["fingerprint"]
    assert bound == {"sha256": rules.sha256(inventory()), "inventory": rules.normalised(inventory())}
    assert rules.sha256(bound["inventory"]) == bound["sha256"]
    assert _verify(certificate.document, certificate).ok


def test_a_certificate_from_before_fingerprints_still_verifies(fleet, setting):
    *_, device, _, diag = setting
    # Given a device whose agent reports no inventory: its certificate binds none
    x = fleet.execution(diag, device=device, metrics=GOOD)
    evaluate_now(x)
    sweep(device.satellite, RC)
    certificate = current(device)
    assert certificate.document["fingerprint"] is None
    # And a document signed before the member existed
    from fleet.burnin.certificates.signing import signing_key
    from fleet_rules.certificates import canonical

    old = {k: v for k, v in certificate.document.items() if k != "fingerprint"}
    key = signing_key()
    envelope = {"certificate": old, "signature": key.sign(canonical(old)), "key_id": key.key_id}
    assert verify_one(json.dumps(envelope).encode(), {key.key_id: key.public_raw}).ok


def test_a_tampered_fingerprint_does_not_verify(fleet, setting):
    *_, device, _, diag = setting
    certificate = _certified(fleet, diag, device)
    document = copy.deepcopy(certificate.document)
    document["fingerprint"]["inventory"]["gpus"][0]["serial"] = "X"
    assert not _verify(document, certificate).ok


def _verify(document, certificate):
    envelope = {"certificate": document, "signature": certificate.signature, "key_id": certificate.key_id}
    return verify_one(json.dumps(envelope).encode(), {certificate.key_id: bytes(certificate.key.public_key)})


def assert_lifted_for_hardware(certificate, device) -> DeviceStateChange:
    """The certificate superseded (`hardware_changed`) by GPU 3's swap (`swapped`), and the accepted
    device back in burn-in with a history entry saying what changed; that entry."""
    certificate.refresh_from_db()
    assert certificate.supersede_reason == SupersedeReason.HARDWARE_CHANGED
    device.refresh_from_db()
    assert device.state == DeviceState.BURN_IN
    change = DeviceStateChange.objects.filter(device=device).first()
    assert (change.from_state, change.to_state, change.cause) == (
        DeviceState.ACCEPTED,
        DeviceState.BURN_IN,
        TransitionCause.CERTIFICATE_SUPERSEDED,
    )
    assert "GPU 3 (00000000:48:00.0) serial 1652020000003 → 1653020000003" in change.reason
    return change


def test_a_swapped_gpu_supersedes_the_certificate_and_sends_an_accepted_device_back_to_burn_in(fleet, setting):
    *_, device, _, diag = setting
    certificate = _certified(fleet, diag, device)
    assert device.state == DeviceState.ACCEPTED
    # When the next report reads GPU 3 with another serial
    fleet.execution(diag, device=device, status="running", inventory=swapped(inventory()))
    # Then the certificate is superseded for the hardware, and the device is back in burn-in saying why
    change = assert_lifted_for_hardware(certificate, device)
    assert change.refs["supersede_reason"] == SupersedeReason.HARDWARE_CHANGED


def test_a_pass_from_before_the_swap_does_not_certify_the_new_hardware(fleet, setting):
    *_, device, _, diag = setting
    old = _certified(fleet, diag, device)
    fleet.execution(diag, device=device, status="running", inventory=swapped(inventory()))
    # A sweep now sees the old pass (the new run is still running: in progress) — no certificate
    sweep(device.satellite, RC)
    assert current(device) is None
    # Even if the row still said passed on the old execution, the old pass does not hold
    from fleet_rules.certificates import DeviceFacts, RequirementEvidence, on_current_hardware

    facts = DeviceFacts(device.id, "h", "s", RC, device.site_id, "lon-1", 1, None, rules.sha256(swapped(inventory())))
    evidence = RequirementEvidence(
        diag.id,
        "gpu-diag",
        "burn-in",
        "single_node",
        "device",
        device.id,
        None,
        "passed",
        fingerprint_sha256=old.document["fingerprint"]["sha256"],
    )
    assert not on_current_hardware(facts, evidence)
    # When the re-burn-in passes on the new hardware, a certificate binds it
    renewed = _certified(fleet, diag, device, swapped(inventory()))
    assert renewed is not None and renewed.serial != old.serial
    assert renewed.document["fingerprint"]["sha256"] == rules.sha256(swapped(inventory()))
    assert device.state == DeviceState.ACCEPTED


def test_an_in_service_device_stays_in_service_without_a_valid_certificate(fleet, setting):
    *_, device, _, diag = setting
    certificate = _certified(fleet, diag, device)
    Device.objects.filter(id=device.id).update(state=DeviceState.IN_SERVICE)
    fleet.execution(diag, device=device, status="running", inventory=swapped(inventory()))
    certificate.refresh_from_db()
    assert certificate.supersede_reason == SupersedeReason.HARDWARE_CHANGED
    device.refresh_from_db()
    assert device.state == DeviceState.IN_SERVICE
    assert current(device) is None


def test_a_reading_that_changed_but_not_the_hardware_leaves_the_certificate(fleet, setting):
    *_, device, _, diag = setting
    certificate = _certified(fleet, diag, device)
    # ibstat fails once, then a port is down: new snapshots, no new hardware
    fleet.execution(diag, device=device, status="running", inventory=inventory(hcas=[], missing=["ibstat: timed out"]))
    down = inventory()
    down["hcas"][0]["ports"][0]["state"] = "Down"
    fleet.execution(diag, device=device, status="running", inventory=down)
    assert FingerprintSnapshot.objects.filter(device=device).count() == 3
    certificate.refresh_from_db()
    assert certificate.superseded_at is None
    device.refresh_from_db()
    assert device.state == DeviceState.ACCEPTED


def test_a_certificate_from_before_fingerprints_is_superseded_by_a_change_seen_after_it(fleet, setting):
    *_, device, _, diag = setting
    x = fleet.execution(diag, device=device, metrics=GOOD)  # no inventory: the certificate binds none
    evaluate_now(x)
    sweep(device.satellite, RC)
    certificate = current(device)
    # The first fingerprint has nothing to compare with; the next one that differs does
    fleet.execution(diag, device=device, status="running", inventory=inventory())
    certificate.refresh_from_db()
    assert certificate.superseded_at is None
    fleet.execution(diag, device=device, status="running", inventory=swapped(inventory()))
    certificate.refresh_from_db()
    assert certificate.supersede_reason == SupersedeReason.HARDWARE_CHANGED


def test_reconcile_pages_take_the_same_queries_with_fingerprints_at_two_sizes(fleet):
    def scope(n, name):
        site = fleet.site(name)
        satellite = fleet.satellite(site, "sat")
        policy = fleet.policy(f"gpu.{name}")
        diag = fleet.requirement(policy, "gpu-diag")
        devices = [fleet.device(satellite, f"gpu.{name}", hostname=f"{name}-{i}") for i in range(n)]
        evaluate_now(*(fleet.execution(diag, device=d, metrics=GOOD, inventory=inventory()) for d in devices))
        return satellite, f"gpu.{name}"

    counts = []
    for satellite, rc in (scope(2, "small"), scope(25, "large")):
        with CaptureQueriesContext(connection) as seen:
            sweep(satellite, rc)
        counts.append(len(seen.captured_queries))
    assert counts[0] == counts[1]
    assert AcceptanceCertificate.objects.filter(document__fingerprint__isnull=False).count() == 27


# --- the API read -----------------------------------------------------------------------------------


def test_the_fingerprints_read_lists_the_history_with_its_changes(fleet, setting, session_client, bearer):
    site, satellite, _, device, _, diag = setting
    fleet.execution(diag, device=device, status="running", inventory=inventory())
    hostile = swapped(inventory(), serial="<img src=x onerror=alert(1)>")
    fleet.execution(diag, device=device, status="running", inventory=hostile)
    url = f"/api/v1/devices/{device.id}/fingerprints/"

    viewer = session_client(perms=["burnin.view_fingerprintsnapshot"], username="viewer")
    response = viewer.get(url)
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["truncated"] is False
    newest, oldest = body["fingerprints"]
    assert (newest["current"], oldest["current"]) == (True, False)
    assert newest["sha256"] == rules.sha256(hostile)
    assert newest["inventory"]["gpus"][3]["serial"] == "<img src=x onerror=alert(1)>"
    assert newest["changes"] == [
        {
            "part": "gpu",
            "text": "GPU 3 (00000000:48:00.0) serial 1652020000003 → <img src=x onerror=alert(1)>",
            "supersedes": True,
        }
    ]
    assert oldest["changes"] == []

    assert session_client(perms=[], username="nobody").get(url).status_code == 403
    other = fleet.satellite(fleet.site("ams-1"), "sat-z")
    assert bearer(["fleet:read"], satellite=other).get(url).status_code == 404
    assert bearer(["fleet:read"], satellite=satellite).get(url).status_code == 200


def test_the_repairs_read_checks_each_part_against_the_next_fingerprint(fleet, setting, session_client):
    from django.utils import timezone

    from fleet.lifecycle.models import Repair

    *_, device, _, diag = setting
    fleet.execution(diag, device=device, status="running", inventory=inventory())
    repair = Repair.objects.create(
        device=device,
        summary="GPU 3 and 4 swapped",
        parts=[
            {"kind": "gpu", "slot": "3", "removed_serial": "1652020000003", "installed_serial": "1653020000003"},
            {"kind": "gpu", "slot": "4", "removed_serial": "1652020000004", "installed_serial": "1653020000004"},
        ],
        actor="user:tech",
        created_at=timezone.now(),
    )
    url = f"/api/v1/devices/{device.id}/repairs/"
    reader = session_client(perms=["inventory.view_device"], username="reader")
    # Before the device reports again: nothing read yet
    (listed,) = reader.get(url).json()["results"]
    assert [c["outcome"] for c in listed["hardware_check"]] == ["not_read_yet", "not_read_yet"]
    # The next job reads GPU 3 swapped, GPU 4 not
    fleet.execution(diag, device=device, status="running", inventory=swapped(inventory()))
    (listed,) = reader.get(url).json()["results"]
    assert listed["id"] == str(repair.id)
    assert [(c["slot"], c["outcome"], c["mismatch"]) for c in listed["hardware_check"]] == [
        ("3", "installed_seen", False),
        ("4", "removed_still_seen", True),
    ]
    assert listed["hardware_check"][1]["text"] == "gpu 4: removed 1652020000004 is still reported"
