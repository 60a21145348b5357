"""A fatal Xid during a passing burn-in, end to end: a real `fleet serve` and a real `fleet-agent`
(simulated executor, `health_faults` = an Xid 79 on a01-n02 mid-window, whatever the node does). Every
burn-in test of the device passes; the health window's report carries the Xid, which asks for a reboot
(docs/remediation.md): the agent reboots the node and runs the burn-in again, the Xid comes back, and the
service moves the device to needs_repair, with the Xid and the reboot in the reason, the repair queue and the
signed evidence pack. a01-n01, without the fault, passes everything and stays in burn-in."""

from __future__ import annotations

import io
import json
import zipfile

import pytest

from fleet.burnin.models import PolicyProgress, TestExecution
from fleet.inventory.models import Device
from fleet_rules.vocabulary import DeviceState
from tests.burnin.test_evidence_pack import independent_verify
from tests.e2e.conftest import sat_a_devices

pytestmark = pytest.mark.e2e


def test_a_fatal_xid_during_a_passing_burn_in_sends_the_device_to_repair(stack):
    healthy, faulty = sat_a_devices()[:2]
    assert (healthy.hostname, faulty.hostname) == ("a01-n01", "a01-n02")
    env = {"FLEET_AGENT_FAULTY_SHARE": "0", "FLEET_AGENT_HEALTH_FAULTS": "a01-n02:xid"}
    stack.agent("once", **env)  # the satellite announces its workflows
    stack.dispatch([healthy.id, faulty.id])
    stack.agent("once", **env)

    verdicts = dict(PolicyProgress.objects.filter(device=faulty).values_list("requirement__name", "verdict"))
    assert verdicts.pop("gpu-health-window") == "failed"
    assert verdicts and set(verdicts.values()) == {"passed"}, verdicts  # every burn-in test passed
    healthy_verdicts = PolicyProgress.objects.filter(device=healthy).values_list("verdict", flat=True)
    assert set(healthy_verdicts) == {"passed"}
    assert Device.objects.get(id=healthy.id).state == DeviceState.BURN_IN  # its rack's collective has not run

    # The second health window's report moved it (after the reboot), with the Xid in the reason.
    assert Device.objects.get(id=faulty.id).state == DeviceState.NEEDS_REPAIR
    first, window = TestExecution.objects.filter(device=faulty, requirement__name="gpu-health-window").order_by(
        "created_at"
    )
    assert [(e["kind"], e["code"]) for e in window.health["xid_events"]] == [("xid", 79)]
    history = stack.operator.get(f"/api/v1/devices/{faulty.id}/history/").json()["results"]
    moved = next(c for c in history if c["to_state"] == "needs_repair")
    assert moved["cause"] == "fatal_xid" and moved["actor"] == "system" and not moved["held"]
    assert moved["reason"].startswith("Xid 79 (GPU has fallen off the bus) on GPU ")
    assert "2nd in 24 h: repair during its burn-in; the ladder taken: reboot at " in moved["reason"]
    assert moved["refs"]["execution"] == str(window.id)
    queue = stack.operator.get(f"/api/v1/burn-in/sites/{faulty.site_id}/repair-queue/").json()["results"]
    assert [(q["hostname"], q["cause"]) for q in queue] == [("a01-n02", "fatal_xid")]

    # The evidence pack holds the event, and verifies without this code.
    pack = stack.operator.get(f"/api/v1/devices/{faulty.id}/evidence-pack/")
    assert pack.status_code == 200
    assert independent_verify(pack.content, stack.operator.get("/api/v1/certificates/keys/").json())
    with zipfile.ZipFile(io.BytesIO(pack.content)) as archive:
        manifest = json.loads(archive.read("manifest.json"))
        report, older = manifest["health"]["reports"]
        assert (report["execution_id"], older["execution_id"]) == (str(window.id), str(first.id))
        assert [(e["code"], e["meaning"]) for e in report["fatal_events"]] == [(79, "GPU has fallen off the bus")]
        assert json.loads(archive.read(report["file"]))["health"]["xid_events"][0]["code"] == 79
    assert manifest["state_history"]["changes"][0]["cause"] == "fatal_xid"
    assert "gpu-health-window" in {t["requirement"]["name"] for t in manifest["targets"]}
