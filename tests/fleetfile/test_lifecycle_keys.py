"""The fleet file and the device lifecycle: a policy's lifecycle settings round-trip (and judge
nothing: no new version); the file's state changes go through the lifecycle table and are recorded;
a file older than the evidence does not undo what the service did."""

from __future__ import annotations

from datetime import timedelta

import pytest
import yaml

from fleet.fleetfile.document import FleetFileError
from fleet.fleetfile.export import fleet_export
from fleet.inventory.models import Device
from fleet.lifecycle.models import DeviceStateChange
from fleet.lifecycle.services import AutomaticMove, automatic_moves_apply, device_transition
from fleet.policies.models import AcceptancePolicy
from fleet_rules.vocabulary import DeviceState, Mover, TransitionCause
from tests.fleetfile.test_apply import EXAMPLE, apply_text, versions

SETTINGS = {"auto_accept": False, "repair_after_failures": 5, "breaker_share": 0.5, "breaker_window": "30m"}


def with_lifecycle(**keys) -> str:
    doc = yaml.safe_load(EXAMPLE.read_text())
    doc["policies"][0]["lifecycle"] = keys
    return yaml.safe_dump(doc, sort_keys=False)


def test_the_settings_are_stored_exported_and_judge_nothing(db):
    apply_text(EXAMPLE.read_text())
    before = versions()
    rc = yaml.safe_load(EXAMPLE.read_text())["policies"][0]["resource_class"]
    summary = apply_text(with_lifecycle(**SETTINGS))
    assert summary.changed and versions() == before
    policy = AcceptancePolicy.objects.get(resource_class=rc)
    assert (policy.auto_accept, policy.repair_after_failures, policy.breaker_share, policy.breaker_window) == (
        False,
        5,
        0.5,
        timedelta(minutes=30),
    )
    (exported,) = [p for p in fleet_export()["policies"] if p["resource_class"] == rc]
    assert exported["lifecycle"] == SETTINGS
    assert not apply_text(with_lifecycle(**SETTINGS)).changed
    apply_text(EXAMPLE.read_text())  # a file that says nothing means the defaults
    assert "lifecycle" not in [p for p in fleet_export()["policies"] if p["resource_class"] == rc][0]


@pytest.mark.parametrize(
    ("keys", "problem"),
    [
        (
            {"breaker_share": 1.5},
            "breaker_share: must be a share of the class's devices, above 0 and at most 1, got 1.5",
        ),
        ({"breaker_share": 0}, "breaker_share: must be a positive finite number, got 0"),
        ({"repair_after_failures": -1}, "repair_after_failures: must be a whole number from 0 to 100, got -1"),
        ({"auto_accept": "yes"}, "auto_accept: must be true or false, got a string"),
        ({"breaker_window": "soon"}, "breaker_window: must be a duration such as 30d, 12h, 90m or 3600s, got 'soon'"),
        ({"breakers": 1}, "breakers"),
    ],
)
def test_bad_settings_are_located_problems(db, keys, problem):
    with pytest.raises(FleetFileError) as caught:
        apply_text(with_lifecycle(**keys))
    assert any(
        where.startswith("policies[0].lifecycle") and problem in f"{where}: {message}"
        for where, message in caught.value.problems
    ), str(caught.value)


def _device_state(doc, hostname: str, state: str) -> str:
    for site in doc["sites"]:
        for device in site["devices"]:
            if device["hostname"] == hostname:
                device["state"] = state
    return yaml.safe_dump(doc, sort_keys=False)


def test_a_state_change_by_the_file_follows_the_table_and_is_recorded(db):
    apply_text(EXAMPLE.read_text())
    doc = yaml.safe_load(EXAMPLE.read_text())
    hostname = doc["sites"][0]["devices"][0]["hostname"]
    device = Device.objects.get(hostname=hostname)
    apply_text(_device_state(doc, hostname, "needs_repair"))
    change = DeviceStateChange.objects.get(device=device)
    assert (change.from_state, change.to_state, change.cause) == (device.state, "needs_repair", "fleet_file")
    with pytest.raises(FleetFileError) as caught:
        apply_text(_device_state(doc, hostname, "burn_in"))
    ((where, message),) = caught.value.problems
    assert where.endswith(".state") and "only when a repair is recorded" in message
    assert Device.objects.get(id=device.id).state == DeviceState.NEEDS_REPAIR


def test_a_file_older_than_the_evidence_leaves_what_the_service_did(db):
    apply_text(EXAMPLE.read_text())
    doc = yaml.safe_load(EXAMPLE.read_text())
    hostname = doc["sites"][0]["devices"][0]["hostname"]
    device = Device.objects.get(hostname=hostname)
    automatic_moves_apply([AutomaticMove(device.id, DeviceState.NEEDS_REPAIR, TransitionCause.FAILED_TOO_OFTEN)])
    summary = apply_text(EXAMPLE.read_text())
    assert Device.objects.get(id=device.id).state == DeviceState.NEEDS_REPAIR
    assert any(hostname in note and "failed_too_often" in note for note in summary.notes), summary.notes
    # once a person moves it, the file's state counts again (and the table judges it)
    device_transition(device_id=device.id, to=DeviceState.MAINTENANCE, mover=Mover.OPERATOR, actor="user:ops")
    with pytest.raises(FleetFileError, match="from maintenance to burn_in only when a repair is recorded"):
        apply_text(EXAMPLE.read_text())
