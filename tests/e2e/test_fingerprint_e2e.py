"""A swapped GPU end to end, with a real `fleet serve` and a real `fleet-agent` (simulated executor,
which reports the device's inventory with every execution of a job):

1. the agent burns the device in: accepted, its certificate binding the fingerprint the agent read;
2. a technician swaps GPU 3 (the simulated executor's knob: `simulated-swaps.json` in the agent's
   state directory);
3. an accepted device is not burn-in eligible, so no job runs on it to read the swap: the running
   agent's inventory sweep (`inventory_interval`, small here) reads the accepted device's hardware
   (the same knob) and reports it (`POST /api/v1/satellites/fingerprints/`) — the certificate is
   superseded with `hardware_changed`, the device is back in burn-in, its history and page say what
   changed;
4. a re-burn-in job run by the agent on the new hardware certifies it again, binding the new
   fingerprint.
"""

from __future__ import annotations

import json
import re
import time

import httpx
import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group

from fleet.access.roles import VIEWER
from fleet.burnin.models import AcceptanceCertificate, FingerprintSnapshot
from fleet.inventory.models import Device
from fleet_agent.executors.base import Target
from fleet_agent.executors.hardware import collect_inventory
from fleet_agent.executors.simulated_hardware import SIMULATED_SWAPS, SimulatedHardware
from fleet_rules import fingerprint
from fleet_rules.vocabulary import DeviceState, SupersedeReason
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
#: The daemon's inventory sweep every half second (the default is an hour).
SWEEP = {"FLEET_AGENT_INVENTORY_INTERVAL": "0.5", "FLEET_AGENT_HEARTBEAT_INTERVAL": "5"}


@pytest.fixture
def small_stack(transactional_db, settings, tmp_path):
    with running_stack(settings, tmp_path, fleet_text=ONE_DEVICE) as running:
        yield running


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
    # 1. Burned in by the agent: accepted, the certificate binding what the agent read
    stack.agent("once", **AGENT)  # heartbeat: the workflows are advertised
    stack.dispatch([device.id], mode="all")
    stack.agent("once", **AGENT)
    device.refresh_from_db()
    assert device.state == DeviceState.ACCEPTED
    certificate = AcceptanceCertificate.objects.get(device=device, superseded_at__isnull=True)
    bound = certificate.document["fingerprint"]
    assert bound is not None and len(bound["inventory"]["gpus"]) == 8
    assert FingerprintSnapshot.objects.get(device=device).sha256 == bound["sha256"]

    # 2. The technician swaps GPU 3 (the simulated executor's knob)
    stack.state_dir.mkdir(parents=True, exist_ok=True)
    swaps = stack.state_dir / SIMULATED_SWAPS
    swaps.write_text(json.dumps({"a01-n01": [3]}))
    target = Target(str(device.id), device.hostname, device.resource_class)
    swapped = collect_inventory(SimulatedHardware(swaps_file=swaps), target)
    before, after = bound["inventory"]["gpus"][3], swapped["gpus"][3]
    assert after["serial"] != before["serial"]

    # 3. The running agent's inventory sweep reads the new hardware: the certificate is superseded and
    # the device is back in burn-in
    agent = stack.spawn_agent("run", **AGENT, **SWEEP)
    try:
        deadline = time.monotonic() + 120  # a bound on the wait, not a timing assertion
        while time.monotonic() < deadline and agent.poll() is None:
            certificate.refresh_from_db()
            if certificate.superseded_at is not None:
                break
            time.sleep(0.5)
    finally:
        agent.terminate()
        _, err = agent.communicate(timeout=60)
    assert agent.returncode == 0, err[-4000:]
    assert "Traceback" not in err
    assert "superseded (hardware_changed)" in err, err[-4000:]
    certificate.refresh_from_db()
    assert certificate.supersede_reason == SupersedeReason.HARDWARE_CHANGED
    device.refresh_from_db()
    assert device.state == DeviceState.BURN_IN
    change = f"GPU 3 ({after['pci_bus_id']}) serial {before['serial']} → {after['serial']}"
    history = stack.operator.get(f"/api/v1/devices/{device.id}/history/").json()["results"]
    assert history[0]["cause"] == "certificate_superseded" and change in history[0]["reason"]
    fingerprints = stack.operator.get(f"/api/v1/devices/{device.id}/fingerprints/").json()["fingerprints"]
    assert change in [c["text"] for c in fingerprints[0]["changes"]]
    page = _page(stack, "a01-n01")
    assert f"hardware changed</strong>: {change}" in page

    # 4. A re-burn-in job on the new hardware: certified again, binding the new fingerprint
    stack.agent("once", **AGENT)  # reconciles: the projection catches up with the report (in progress)
    assert len(stack.dispatch([device.id], mode="all")["created_jobs"]) == 1
    stack.agent("once", **AGENT)
    device.refresh_from_db()
    assert device.state == DeviceState.ACCEPTED
    renewed = AcceptanceCertificate.objects.get(device=device, superseded_at__isnull=True)
    assert renewed.document["fingerprint"]["sha256"] == fingerprint.sha256(swapped)
    assert renewed.document["fingerprint"]["inventory"]["gpus"][3]["serial"] == after["serial"]
