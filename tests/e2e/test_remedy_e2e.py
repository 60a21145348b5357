"""The remediation ladder end to end (docs/remediation.md): a real `fleet serve` and real `fleet-agent` passes
(simulated executor). An Xid 95 (uncontained ECC: the catalogue asks for a GPU reset) mid-window:

* transient (`health_faults` `transient=95`: a reset cures it): the service asks for a reset, the agent takes it
  in a `remediation` job and runs the burn-in again, which passes; the device is never sent to repair;
* persisting (`xid=95`): a reset, then a reboot, then `needs_repair` with the ladder in the reason, the repair
  queue and the signed evidence pack;
* a job-wide burst (`crash`: an Xid 13 logged on every node of a rack during its collective): the workload's, the
  collective's execution is errored "the workload crashed on 4 devices", no device moves, no step is asked.
"""

from __future__ import annotations

import io
import json
import zipfile

import pytest

from fleet.burnin.models import PolicyProgress, RemedyStep, TestExecution
from fleet.inventory.models import Device
from fleet.jobs.models import Job
from fleet_rules.vocabulary import DeviceState, JobReason, WorkflowName
from tests.burnin.test_evidence_pack import independent_verify
from tests.e2e.conftest import sat_a_devices

pytestmark = pytest.mark.e2e


def _steps(device) -> list[tuple[str, str]]:
    return list(RemedyStep.objects.filter(device=device).order_by("created_at").values_list("step", "outcome"))


def test_a_transient_xid_cured_by_a_gpu_reset_sends_nothing_to_repair(stack):
    _, faulty = sat_a_devices()[:2]
    env = {"FLEET_AGENT_FAULTY_SHARE": "0", "FLEET_AGENT_HEALTH_FAULTS": f"{faulty.hostname}:transient=95"}
    stack.agent("once", **env)  # the satellite announces its workflows
    stack.dispatch([faulty.id])
    stack.agent("once", **env)  # the burn-in (its window logs the Xid 95), the reset, the burn-in again

    (remediation,) = Job.objects.filter(reason=JobReason.REMEDIATION)
    assert remediation.parameters["remedy"]["step"] == "reset_gpu" and remediation.status == "succeeded"
    assert _steps(faulty) == [("reset_gpu", "cured")]
    assert Device.objects.get(id=faulty.id).state == DeviceState.BURN_IN  # its rack's collective has not run
    verdicts = dict(PolicyProgress.objects.filter(device=faulty).values_list("requirement__name", "verdict"))
    assert verdicts["gpu-health-window"] == "passed" and set(verdicts.values()) == {"passed"}, verdicts
    history = stack.operator.get(f"/api/v1/devices/{faulty.id}/history/").json()["results"]
    assert not [c for c in history if c["to_state"] == "needs_repair"]


def test_a_persisting_xid_takes_a_reset_then_a_reboot_then_goes_to_repair_with_the_ladder(stack):
    _, faulty = sat_a_devices()[:2]
    env = {"FLEET_AGENT_FAULTY_SHARE": "0", "FLEET_AGENT_HEALTH_FAULTS": f"{faulty.hostname}:xid=95"}
    stack.agent("once", **env)
    stack.dispatch([faulty.id])
    stack.agent("once", **env)  # the burn-in, the reset and the burn-in, the reboot and the burn-in

    assert list(
        Job.objects.filter(reason=JobReason.REMEDIATION)
        .order_by("created_at")
        .values_list("parameters__remedy__step", flat=True)
    ) == ["reset_gpu", "reboot"]
    assert _steps(faulty) == [("reset_gpu", "persisted"), ("reboot", "persisted")]
    assert Device.objects.get(id=faulty.id).state == DeviceState.NEEDS_REPAIR
    history = stack.operator.get(f"/api/v1/devices/{faulty.id}/history/").json()["results"]
    moved = next(c for c in history if c["to_state"] == "needs_repair")
    assert moved["cause"] == "fatal_xid" and moved["actor"] == "system"
    assert moved["reason"].startswith("Xid 95 (Uncontained memory error) on GPU ")
    assert "the ladder is exhausted in 24 h: GPU reset at " in moved["reason"]
    assert [(s["step"], s["outcome"]) for s in moved["refs"]["ladder"]] == [
        ("reset_gpu", "persisted"),
        ("reboot", "persisted"),
    ]
    queue = stack.operator.get(f"/api/v1/burn-in/sites/{faulty.site_id}/repair-queue/").json()["results"]
    (entry,) = queue
    assert entry["hostname"] == faulty.hostname and "the ladder is exhausted" in entry["reason"]

    pack = stack.operator.get(f"/api/v1/devices/{faulty.id}/evidence-pack/")
    assert pack.status_code == 200
    assert independent_verify(pack.content, stack.operator.get("/api/v1/certificates/keys/").json())
    with zipfile.ZipFile(io.BytesIO(pack.content)) as archive:
        manifest = json.loads(archive.read("manifest.json"))
    change = next(c for c in manifest["state_history"]["changes"] if c["to_state"] == "needs_repair")
    assert "the ladder is exhausted" in change["reason"]
    assert [(s["step"], s["outcome"]) for s in manifest["remediation"]["steps"]] == [
        ("reset_gpu", "persisted"),
        ("reboot", "persisted"),
    ]


def test_a_job_wide_burst_during_a_rack_collective_is_the_workloads_and_moves_no_device(stack):
    rack = sat_a_devices()[:4]  # rack-a01
    crash = ",".join(f"{d.hostname}:crash" for d in rack)  # an Xid 13 on every node, in the collective only
    env = {"FLEET_AGENT_FAULTY_SHARE": "0", "FLEET_AGENT_HEALTH_FAULTS": crash}
    stack.agent("once", **env)
    stack.dispatch([d.id for d in rack])
    stack.agent("once", **env)  # the single-node burn-in: their health windows log nothing
    assert not RemedyStep.objects.exists()
    collective = stack.dispatch([d.id for d in rack])
    assert [j["workflow_name"] for j in collective["created_jobs"]] == [WorkflowName.MULTI_NODE_COLLECTIVE]

    stack.agent("once", **env)  # the rack's collective: each node's kernel log of its window holds the Xid 13

    (execution,) = TestExecution.objects.filter(topology__isnull=False)
    assert execution.status == "errored"
    assert execution.error == "the workload crashed on 4 devices (Xid 13)"
    assert not RemedyStep.objects.exists()
    assert not Job.objects.filter(reason=JobReason.REMEDIATION).exists()
    assert set(Device.objects.filter(id__in=[d.id for d in rack]).values_list("state", flat=True)) == {
        DeviceState.BURN_IN
    }
    for device in rack:
        history = stack.operator.get(f"/api/v1/devices/{device.id}/history/").json()["results"]
        assert not [c for c in history if c["to_state"] == "needs_repair"]
