"""A swapped GPU end to end: a real `fleet serve` and a real `fleet-agent` (simulated executor)
accept a device; its inventory is then reported over HTTP with the agent's own client and
satellite credentials (the agent that collects inventories is another helper's branch, not on
main yet); the report with GPU 3 swapped supersedes the certificate (`hardware_changed`), the
device is back in burn-in with the change in its history and on its page, and a re-burn-in on the
new hardware certifies it again, binding the new fingerprint."""

from __future__ import annotations

import copy
import os
import re
import socket
import uuid

import httpx
import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group

from fleet.access.roles import VIEWER
from fleet.burnin.models import AcceptanceCertificate, FingerprintSnapshot
from fleet.inventory.models import Device
from fleet_agent.client import FleetClient
from fleet_rules import fingerprint
from fleet_rules.vocabulary import DeviceState, SupersedeReason
from tests import helpers
from tests.payloads import inventory
from tests.support.stack import running_stack

pytestmark = pytest.mark.e2e

ONE_DEVICE = """
sites:
  - slug: lon-1
    satellites: [{name: sat-a}]
    devices:
      - {hostname: a01-n01, serial: H200-1017, resource_class: gpu.h200.8x, satellite: sat-a,
         state: burn_in, enrolled: true}
policies:
  - resource_class: gpu.h200.8x
    requirements:
      - name: gpu-diag
        gate: burn-in
        test: dcgm-diag
        thresholds: [{metric: diag_failed_tests, comparator: eq, threshold: 0}]
parameter_profiles:
  - {resource_class: gpu.h200.8x, test: dcgm-diag, parameters: {level: 3}}
"""
AGENT = {"FLEET_AGENT_FAULTY_SHARE": "0", "FLEET_AGENT_ERRORED_SHARE": "0"}
SWAPPED_SERIAL = "1653020000003"


#: The ports this test's server may take (FLEET_E2E_PORTS="first-last"; any free port when unset).
PORTS = os.environ.get("FLEET_E2E_PORTS", "")


def _port_in_range() -> int:
    first, last = (int(p) for p in PORTS.split("-"))
    for port in range(first, last + 1):
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) != 0:
                return port
    raise RuntimeError(f"no free port in {PORTS}")


@pytest.fixture
def small_stack(transactional_db, settings, tmp_path, monkeypatch):
    if PORTS:
        monkeypatch.setattr(helpers, "free_port", _port_in_range)
    with running_stack(settings, tmp_path, fleet_text=ONE_DEVICE) as running:
        yield running


def _report(client: FleetClient, device: Device, value: dict, status: str) -> str:
    """One execution of gpu-diag, reported running then finished (passing) with `value`."""
    execution_id = str(uuid.uuid4())
    body = {
        "requirement": "gpu-diag",
        "device_id": str(device.id),
        "status": "running",
        "started_at": "2026-12-03T12:00:00Z",
        "inventory": value,
    }
    client.report_execution(execution_id, body)
    if status != "running":
        client.report_execution(
            execution_id,
            body
            | {
                "status": status,
                "finished_at": "2026-12-03T12:30:00Z",
                "metrics": {"diag_failed_tests": {"value": 0, "unit": "tests"}},
            },
        )
    return execution_id


def _page(stack, hostname: str) -> str:
    """The device page as a person with the viewer role reads it (signed in through the form)."""
    user = get_user_model().objects.create_user("viewer-e2e", password="viewer-e2e-password")
    user.groups.add(Group.objects.get(name=VIEWER))
    with httpx.Client(base_url=stack.base, timeout=60, follow_redirects=True) as browser:
        login = browser.get("/accounts/login/")
        token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', login.text).group(1)
        signed_in = browser.post(
            "/accounts/login/",
            data={"username": "viewer-e2e", "password": "viewer-e2e-password", "csrfmiddlewaretoken": token},
            headers={"Referer": f"{stack.base}/accounts/login/"},
        )
        assert signed_in.status_code == 200, signed_in.text[:500]
        page = browser.get(f"/sites/lon-1/devices/{hostname}/")
        assert page.status_code == 200
        return page.text


def test_a_swapped_gpu_supersedes_the_certificate_and_sends_the_device_back_to_burn_in(small_stack):
    stack = small_stack
    device = Device.objects.get(hostname="a01-n01")
    # The agent burns the device in: accepted, its certificate binding no fingerprint (main's agent reports none)
    stack.agent("once", **AGENT)  # heartbeat: the workflows are advertised
    stack.dispatch([device.id], mode="all")
    stack.agent("once", **AGENT)
    device.refresh_from_db()
    assert device.state == DeviceState.ACCEPTED

    client = FleetClient(stack.base, stack.client_id, stack.client_secret)
    # A run reporting the device's inventory: the first fingerprint, which a renewed certificate binds
    _report(client, device, inventory(), "completed")
    stack.agent("once", **AGENT)  # evaluates it and reconciles
    bound = AcceptanceCertificate.objects.get(device=device, superseded_at__isnull=True)
    assert bound.document["fingerprint"]["sha256"] == fingerprint.sha256(inventory())

    # GPU 3 swapped: the next report supersedes the certificate and the device goes back to burn-in
    swapped = copy.deepcopy(inventory())
    swapped["gpus"][3]["serial"] = SWAPPED_SERIAL
    _report(client, device, swapped, "running")
    bound.refresh_from_db()
    assert bound.supersede_reason == SupersedeReason.HARDWARE_CHANGED
    device.refresh_from_db()
    assert device.state == DeviceState.BURN_IN
    history = stack.operator.get(f"/api/v1/devices/{device.id}/history/").json()["results"]
    change = "GPU 3 (00000000:48:00.0) serial 1652020000003 → 1653020000003"
    assert history[0]["cause"] == "certificate_superseded" and change in history[0]["reason"]
    fingerprints = stack.operator.get(f"/api/v1/devices/{device.id}/fingerprints/").json()["fingerprints"]
    assert fingerprints[0]["changes"][0]["text"] == change
    page = _page(stack, "a01-n01")
    assert "hardware changed</strong>: GPU 3 (00000000:48:00.0) serial 1652020000003 → 1653020000003" in page
    assert FingerprintSnapshot.objects.filter(device=device).count() == 2

    # Burned in again on the new hardware: certified again, binding the new fingerprint
    _report(client, device, swapped, "completed")
    stack.agent("once", **AGENT)
    device.refresh_from_db()
    renewed = AcceptanceCertificate.objects.get(device=device, superseded_at__isnull=True)
    assert renewed.document["fingerprint"]["sha256"] == fingerprint.sha256(swapped)
    assert device.state == DeviceState.ACCEPTED
