"""AMD Instinct nodes end to end, with a real `fleet serve` and a real `fleet-agent` (simulated executor; the agent
learns the class's vendor from its policy at the service, `gpu_vendor: amd`):

1. an MI300X is burned in with AMD's tools (RVS, TransferBench, rccl-tests, the health window read with `amd-smi`
   and the amdgpu log) and accepted, its certificate binding the fingerprint `amd-smi static` gave;
2. a technician swaps its GPU 3: the running agent's inventory sweep reads `amd-smi static` on the accepted node,
   and the certificate is superseded with `hardware_changed`;
3. a GPU reset logged by the amdgpu driver during an otherwise passing burn-in sends the node to `needs_repair`,
   the event in the reason, the repair queue and the signed evidence pack.
"""

from __future__ import annotations

import io
import json
import time
import zipfile

import pytest

from fleet.burnin.models import AcceptanceCertificate, FingerprintSnapshot, PolicyProgress, TestExecution
from fleet.inventory.models import Device
from fleet_agent.executors.base import Target
from fleet_agent.executors.hardware import collect_inventory
from fleet_agent.executors.simulated_hardware import SIMULATED_SWAPS, SimulatedHardware
from fleet_rules.vocabulary import DeviceState, SupersedeReason
from tests.burnin.test_evidence_pack import independent_verify
from tests.e2e.test_fingerprint_e2e import _page
from tests.support.stack import running_stack

pytestmark = pytest.mark.e2e

AMD_RACK = """
sites:
  - slug: lon-1
    satellites: [{name: sat-a}]
    devices:
      - {hostname: c01-n01, serial: MI300X-1017, resource_class: gpu.mi300x.8x, satellite: sat-a,
         state: burn_in, enrolled: true}
      - {hostname: c01-n02, serial: MI300X-1027, resource_class: gpu.mi300x.8x, satellite: sat-a,
         state: burn_in, enrolled: true}
policies:
  - resource_class: gpu.mi300x.8x
    gpu_vendor: amd
    requirements:
      - {name: rvs-stress, gate: burn-in, test: rvs-stress,
         thresholds: [{metric: rvs_failed, comparator: eq, threshold: 0}]}
      - {name: transferbench-a2a, gate: burn-in, test: transferbench-a2a,
         thresholds: [{metric: a2a_avg_gbps, comparator: gte, threshold: 32.9},
                      {metric: a2a_min_link_gbps, comparator: gte, threshold: 25}]}
      - {name: rccl-in-node, gate: burn-in, test: rccl-all-reduce,
         thresholds: [{metric: busbw_gbps, comparator: gte, threshold: 304}]}
      - {name: gpu-health-window, gate: burn-in, test: health-window,
         thresholds: [{metric: amdgpu_ras_fatal_count, comparator: eq, threshold: 0},
                      {metric: ecc_uncorrected_delta, comparator: eq, threshold: 0},
                      {metric: gpu_count, comparator: eq, threshold: 8}]}
parameter_profiles:
  - {resource_class: gpu.mi300x.8x, test: rvs-stress, parameters: {duration_s: 600}}
  - {resource_class: gpu.mi300x.8x, test: transferbench-a2a, parameters: {}}
  - {resource_class: gpu.mi300x.8x, test: rccl-all-reduce, parameters: {max_bytes: 8589934592, gpus: 8}}
  - {resource_class: gpu.mi300x.8x, test: health-window, parameters: {}}
"""
AGENT = {"FLEET_AGENT_FAULTY_SHARE": "0", "FLEET_AGENT_ERRORED_SHARE": "0"}
SWEEP = {"FLEET_AGENT_INVENTORY_INTERVAL": "0.5", "FLEET_AGENT_HEARTBEAT_INTERVAL": "5"}


@pytest.fixture
def amd_stack(transactional_db, settings, tmp_path):
    with running_stack(settings, tmp_path, fleet_text=AMD_RACK) as running:
        yield running


def test_an_mi300x_is_certified_on_its_amd_fingerprint_and_a_swapped_gpu_supersedes_it(amd_stack):
    stack = amd_stack
    device = Device.objects.get(hostname="c01-n01")
    # 1. Burned in with AMD's tools and accepted, the certificate binding what amd-smi static read
    stack.agent("once", **AGENT)  # heartbeat: the workflows are advertised
    stack.dispatch([device.id], mode="all")
    stack.agent("once", **AGENT)
    device.refresh_from_db()
    verdicts = dict(PolicyProgress.objects.filter(device=device).values_list("requirement__name", "verdict"))
    assert verdicts == dict.fromkeys(("rvs-stress", "transferbench-a2a", "rccl-in-node", "gpu-health-window"), "passed")
    assert device.state == DeviceState.ACCEPTED
    certificate = AcceptanceCertificate.objects.get(device=device, superseded_at__isnull=True)
    bound = certificate.document["fingerprint"]
    gpus = bound["inventory"]["gpus"]
    assert [g["product_name"] for g in gpus] == ["AMD Instinct MI300X"] * 8
    assert gpus[0]["pci_bus_id"] == "0000:05:00.0" and bound["inventory"]["driver_version"] == "6.10.5"
    assert FingerprintSnapshot.objects.get(device=device).sha256 == bound["sha256"]
    stress = TestExecution.objects.get(device=device, requirement__name="rvs-stress")
    assert stress.metrics["gst_gflops"]["unit"] == "GFLOPS" and stress.metrics["gst_failed_gpus"]["value"] == 0
    window = TestExecution.objects.get(device=device, requirement__name="gpu-health-window")
    assert window.metrics["amdgpu_ras_fatal_count"]["value"] == 0 and "xid_fatal_count" not in window.metrics
    assert set(window.health["ecc"]["after"]) >= {"ecc_uncorrected", "ecc_corrected", "throttle_active"}

    # 2. The technician swaps GPU 3; the running agent's sweep reads amd-smi static on the accepted node
    stack.state_dir.mkdir(parents=True, exist_ok=True)
    swaps = stack.state_dir / SIMULATED_SWAPS
    swaps.write_text(json.dumps({"c01-n01": [3]}))
    target = Target(str(device.id), device.hostname, device.resource_class, "amd")
    after = collect_inventory(SimulatedHardware(swaps_file=swaps), target)["gpus"][3]
    before = gpus[3]
    assert after["serial"] != before["serial"]
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
    certificate.refresh_from_db()
    assert certificate.supersede_reason == SupersedeReason.HARDWARE_CHANGED
    device.refresh_from_db()
    assert device.state == DeviceState.BURN_IN
    change = f"GPU 3 ({after['pci_bus_id']}) serial {before['serial']} → {after['serial']}"
    history = stack.operator.get(f"/api/v1/devices/{device.id}/history/").json()["results"]
    assert history[0]["cause"] == "certificate_superseded" and change in history[0]["reason"]
    page = _page(stack, "c01-n01")
    assert f"hardware changed</strong>: {change}" in page
    assert '<span class="vendor" data-gpu-vendor="amd">· AMD GPUs</span>' in page


def test_a_gpu_reset_during_a_passing_mi300x_burn_in_sends_it_to_repair_with_the_event(amd_stack):
    stack = amd_stack
    healthy, faulty = Device.objects.get(hostname="c01-n01"), Device.objects.get(hostname="c01-n02")
    env = AGENT | {"FLEET_AGENT_HEALTH_FAULTS": "c01-n02:reset"}
    stack.agent("once", **env)
    stack.dispatch([healthy.id, faulty.id])
    stack.agent("once", **env)

    verdicts = dict(PolicyProgress.objects.filter(device=faulty).values_list("requirement__name", "verdict"))
    assert verdicts.pop("gpu-health-window") == "failed"
    assert verdicts and set(verdicts.values()) == {"passed"}, verdicts  # every burn-in test passed
    assert Device.objects.get(id=healthy.id).state == DeviceState.ACCEPTED
    assert Device.objects.get(id=faulty.id).state == DeviceState.NEEDS_REPAIR

    window = TestExecution.objects.get(device=faulty, requirement__name="gpu-health-window")
    fatal = [e for e in window.health["xid_events"] if e["kind"] == "amdgpu" and e["code"] == 4]
    assert [e["pci_bus_id"] for e in fatal] == ["0000:05:00.0"] and "GPU reset begin!" in fatal[0]["message"]
    history = stack.operator.get(f"/api/v1/devices/{faulty.id}/history/").json()["results"]
    moved = next(c for c in history if c["to_state"] == "needs_repair")
    assert moved["cause"] == "fatal_xid" and moved["actor"] == "system" and not moved["held"]
    assert moved["reason"].startswith("amdgpu event 4 (GPU reset) on GPU 0000:05:00.0: repair asked")
    assert moved["refs"]["execution"] == str(window.id)
    queue = stack.operator.get(f"/api/v1/burn-in/sites/{faulty.site_id}/repair-queue/").json()["results"]
    assert [(q["hostname"], q["cause"]) for q in queue] == [("c01-n02", "fatal_xid")]

    pack = stack.operator.get(f"/api/v1/devices/{faulty.id}/evidence-pack/")
    assert pack.status_code == 200
    assert independent_verify(pack.content, stack.operator.get("/api/v1/certificates/keys/").json())
    with zipfile.ZipFile(io.BytesIO(pack.content)) as archive:
        manifest = json.loads(archive.read("manifest.json"))
        (report,) = manifest["health"]["reports"]
        assert report["execution_id"] == str(window.id)
        assert [(e["code"], e["meaning"]) for e in report["fatal_events"]] == [(4, "GPU reset")]
        logged = json.loads(archive.read(report["file"]))["health"]["xid_events"]
        assert any(e["message"].endswith("GPU reset begin!") for e in logged)
    assert manifest["policy"]["gpu_vendor"] == "amd"
    assert manifest["state_history"]["changes"][0]["cause"] == "fatal_xid"
