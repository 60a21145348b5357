"""The acceptance gate: an uncertified device cannot move to `accepted` through the API, the fleet
file or the admin; an explicit override is recorded with who and why."""

from __future__ import annotations

import pytest
from django.core.management import CommandError, call_command

from fleet.burnin.models import AcceptanceOverride
from fleet.inventory.models import Device
from tests.burnin.certs import evaluate_now, sweep

RC = "gpu.h200.8x"
VIEW = ["inventory.change_device"]
FORCE = [*VIEW, "burnin.add_acceptanceoverride"]


@pytest.fixture
def two_devices(fleet):
    """n0 certified, n1 not (its diag never ran); the policy leaves acceptance to people."""
    site = fleet.site("lon-1")
    satellite = fleet.satellite(site, "sat-a")
    diag = fleet.requirement(fleet.policy(RC, auto_accept=False), "gpu-diag")
    devices = [fleet.device(satellite, RC, hostname=f"n{i}") for i in range(2)]
    evaluate_now(fleet.execution(diag, device=devices[0], metrics={"diag_failed_tests": {"value": 0}}))
    sweep(satellite)
    return devices


def accept(client, device, **body):
    if "csrftoken" not in client.cookies:
        client.get("/accounts/login/")
    csrf = client.cookies["csrftoken"].value
    return client.post(f"/api/v1/devices/{device.id}/accept/", body, format="json", HTTP_X_CSRFTOKEN=csrf)


def state(device) -> str:
    return Device.objects.get(id=device.id).state


def test_the_api_accepts_a_certified_device_and_refuses_an_uncertified_one(two_devices, session_client):
    certified, uncertified = two_devices
    client = session_client(perms=VIEW)
    response = accept(client, certified)
    assert response.status_code == 200, response.content
    assert response.json()["state"] == "accepted" and response.json()["override"] is None

    response = accept(client, uncertified)
    assert response.status_code == 409
    assert response.json()["code"] == "conflict"
    assert "no valid acceptance certificate" in response.json()["detail"]
    assert state(uncertified) == "burn_in"

    # Forcing needs the override permission, and a reason.
    assert accept(client, uncertified, force=True, reason="customer waiver").status_code == 403
    forcer = session_client(perms=FORCE, username="lead")
    response = accept(forcer, uncertified, force=True)
    assert response.status_code == 400
    assert [e["field"] for e in response.json()["field_errors"]] == ["reason"]
    assert state(uncertified) == "burn_in" and not AcceptanceOverride.objects.exists()

    response = accept(forcer, uncertified, force=True, reason="customer waiver #42")
    assert response.status_code == 200
    assert response.json()["override"]["actor"] == "user:lead"
    override = AcceptanceOverride.objects.get()
    assert (override.device_id, override.actor, override.reason) == (uncertified.id, "user:lead", "customer waiver #42")
    assert state(uncertified) == "accepted"


FILE = """
sites:
  - slug: lon-1
    satellites: [{{name: sat-a}}]
    devices:
      - {{hostname: n0, serial: S0, resource_class: gpu.h200.8x, state: {s0}, enrolled: true}}
      - {{hostname: n1, serial: S1, resource_class: gpu.h200.8x, state: {s1}, enrolled: true}}
"""


def test_the_fleet_file_refuses_an_uncertified_acceptance_unless_forced_with_a_reason(two_devices, tmp_path):
    certified, uncertified = two_devices
    path = tmp_path / "fleet.yaml"
    path.write_text(FILE.format(s0="accepted", s1="accepted"))
    with pytest.raises(CommandError, match="nothing was written"):
        call_command("apply", "-f", str(path))
    assert (state(certified), state(uncertified)) == ("burn_in", "burn_in")

    with pytest.raises(CommandError, match="--reason"):
        call_command("apply", "-f", str(path), "--force")

    call_command("apply", "-f", str(path), "--force", "--reason", "vendor swap, evidence on ticket 7")
    assert (state(certified), state(uncertified)) == ("accepted", "accepted")
    override = AcceptanceOverride.objects.get()
    assert override.device_id == uncertified.id  # the certified one needed no override
    assert override.actor.startswith("fleet-apply:") and override.reason == "vendor swap, evidence on ticket 7"


def test_the_fleet_file_names_the_refused_device(two_devices):
    from fleet.fleetfile.apply import fleet_apply
    from fleet.fleetfile.document import FleetFileError, parse_text

    with pytest.raises(FleetFileError) as refused:
        fleet_apply(document=parse_text(FILE.format(s0="accepted", s1="accepted")))
    assert [where for where, _ in refused.value.problems] == ["sites[0].devices[1].state"]


def test_the_admin_refuses_an_uncertified_acceptance_and_records_an_override(two_devices, user_factory, client):
    certified, uncertified = two_devices
    admin_user = user_factory("root", superuser=True)
    client.force_login(admin_user)

    def post(device, **extra):
        data = {
            "site": device.site_id,
            "satellite": device.satellite_id,
            "hostname": device.hostname,
            "serial": device.serial,
            "resource_class": device.resource_class,
            "state": "accepted",
            "enrolled_at_0": "2026-12-01",
            "enrolled_at_1": "10:00:00",
            "memberships-TOTAL_FORMS": "0",
            "memberships-INITIAL_FORMS": "0",
            **extra,
        }
        return client.post(f"/admin/inventory/device/{device.id}/change/", data)

    response = post(uncertified)
    assert response.status_code == 200  # the form again, with the error
    assert b"no valid acceptance certificate" in response.content
    assert state(uncertified) == "burn_in"

    assert post(certified).status_code == 302
    assert state(certified) == "accepted"

    assert post(uncertified, acceptance_override_reason="lab sample, never sold").status_code == 302
    assert state(uncertified) == "accepted"
    assert AcceptanceOverride.objects.get().actor == "user:root"
