"""The command executor runs AMD's tools with the commands docs/agent.md documents (the tools here are scripts that
print real outputs of tests/agent/fixtures/amd/), and the inventory sweep reads `amd-smi static` on AMD nodes."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import pytest

from fleet_agent.config import AgentConfig
from fleet_agent.executors import Target, TestRun
from fleet_agent.executors.command import CommandExecutor
from fleet_agent.executors.hardware import HEALTH_WINDOW_TEST, collect_inventory
from fleet_agent.runner import Agent
from fleet_agent.state import AgentState
from tests.agent.test_hardware_collection import script
from tests.agent.test_inventory_sweep import REQUIRED, Service, client_for, node

AMD_FIXTURES = Path(__file__).parent / "fixtures" / "amd"
MI300X = "gpu.mi300x.8x"
STATIC = AMD_FIXTURES / "amd_smi_static_rocm7_mi350x_derived_from_text.json"


def amd_executor(tmp_path: Path, kernel_log: str) -> CommandExecutor:
    """The documented AMD commands, without `ssh {hostname}`, over scripts that print real outputs."""
    rvs = script(tmp_path / "rvs", f"cat {AMD_FIXTURES / 'rvs_1.x_mi355x_gst_fp4.txt'} "
                                   f"{AMD_FIXTURES / 'rvs_1.x_mi355x_iet_1400w.txt'}\n")  # fmt: skip
    transferbench = script(
        tmp_path / "TransferBench", f"cat {AMD_FIXTURES / 'transferbench_mi300x_a2a_acceptance_squeezed.txt'}\n"
    )
    all_reduce = script(
        tmp_path / "all_reduce_perf", f"cat {AMD_FIXTURES / 'rccl_tests_develop_a7809b3_mi300x_8gpu.txt'}\n"
    )
    return CommandExecutor(
        {
            "rvs-stress": {
                "template": f"{rvs} -c /opt/rocm/share/rocm-validation-suite/conf/MI300X/gst_single.conf",
                "parser": "rvs",
                "timeout": 60,
            },  # fmt: skip
            "transferbench-a2a": {"template": f"{transferbench} a2a", "parser": "transferbench"},
            "rccl-all-reduce": {
                "template": f"{all_reduce} -b {{min_bytes}} -e {{max_bytes}} -f {{step_factor}} -g {{gpus}}",
                "parser": "rccl-tests",
            },
        },
        hardware_commands={
            "gpu_inventory": {"amd": f"cat {STATIC}", "nvidia": "false"},
            "gpu_health": {"amd": f"cat {AMD_FIXTURES / 'amd_smi_metric_rocm7_mi300x_derived_umc_sdma_errors.json'}"},
            "kernel_log": kernel_log,
        },
    )


@pytest.mark.process
def test_the_command_executor_runs_rvs_transferbench_and_rccl_tests_through_their_parsers(tmp_path: Path) -> None:
    executor = amd_executor(tmp_path, "true")
    node_ = Target("d1", "c01-n01", MI300X, "amd")
    profile = {"min_bytes": 8, "max_bytes": 8589934592, "step_factor": 2, "gpus": 8}

    rvs = executor.run(TestRun("rvs-stress", "rvs-stress", {}, (node_,)), attempt=1)
    a2a = executor.run(TestRun("transferbench-a2a", "transferbench-a2a", {}, (node_,)), attempt=1)
    rccl = executor.run(TestRun("rccl-in-node", "rccl-all-reduce", profile, (node_,)), attempt=1)

    assert rvs.status == a2a.status == rccl.status == "completed", (rvs.error, a2a.error, rccl.error)
    assert rvs.metrics["gst_failed_gpus"] == {"value": 0} and rvs.metrics["iet_power_w"]["value"] == 1398.0
    assert a2a.metrics["a2a_avg_gbps"] == {"value": 35.776, "unit": "GB/s"}
    assert rccl.metrics["busbw_gbps"]["value"] == 315.69 and rccl.metrics["wrong"] == {"value": 0}


@pytest.mark.process
def test_an_amd_nodes_inventory_and_health_window_are_read_with_amd_smi_and_the_amdgpu_log(tmp_path: Path) -> None:
    stamp = (datetime.now(UTC) - timedelta(minutes=1)).strftime("%Y-%m-%dT%H:%M:%S.%f+0000")
    journal = script(
        tmp_path / "journalctl", f'echo "{stamp} c01-n01 kernel: amdgpu 0000:05:00.0: amdgpu: GPU reset begin!"\n'
    )
    executor = amd_executor(tmp_path, f"{journal} -k --since @{{since_epoch}}")
    node_ = Target("d1", "c01-n01", MI300X, "amd")

    inventory = collect_inventory(executor.hardware, node_)
    window = TestRun("w", HEALTH_WINDOW_TEST, {}, (node_,), window_since=datetime.now(UTC) - timedelta(minutes=5))
    outcome = executor.run(window, attempt=1)

    assert inventory["gpus"][0]["product_name"] == "AMD Instinct MI350X"
    assert inventory["gpus"][0]["pci_bus_id"] == "0000:05:00.0" and inventory["driver_version"] == "6.18.3"
    assert outcome.status == "completed", outcome.error
    assert outcome.metrics["amdgpu_ras_fatal_count"]["value"] == 1
    assert outcome.metrics["ecc_uncorrected_delta"]["value"] == 0  # one SDMA error before and after: no growth
    assert outcome.health is not None and outcome.health["source"] == "journalctl"
    assert outcome.health["xid_events"][0]["kind"] == "amdgpu"
    assert "xid_fatal_count" not in outcome.metrics


@pytest.mark.process
def test_the_inventory_sweep_reads_amd_smi_static_on_amd_nodes_and_nvidia_smi_elsewhere(tmp_path: Path) -> None:
    service = Service([node(1, "accepted", MI300X), node(2, "in_service", "gpu.h200.8x")])
    settings = AgentConfig(**REQUIRED, state_dir=str(tmp_path / "state"), gpu_vendors={MI300X: "amd"})
    agent = Agent(settings, client_for(service), amd_executor(tmp_path, "true"), AgentState(settings.state_dir))

    report = agent.sweep_inventory()

    (posted,) = service.posted
    (amd_node,) = posted["devices"]
    assert amd_node["hostname"] == "n01"
    assert amd_node["inventory"]["gpus"][0]["part_number"] == "113-M350-01-1K0-920A"
    assert report.skipped == ["n02: its GPUs could not be read (nvidia-smi: false exited with status 1)"]


class ServiceWithPolicies(Service):
    """The scripted service, also answering the satellite's resource classes with each one's policy's vendor."""

    def __call__(self, request: httpx.Request) -> httpx.Response:
        if request.url.path == "/api/v1/satellites/resource-classes/":
            return httpx.Response(
                200, json={"resource_classes": [MI300X, "gpu.h200.8x"], "gpu_vendors": {MI300X: "amd"}}
            )
        return super().__call__(request)


@pytest.mark.process
def test_an_agent_not_told_the_vendor_learns_it_from_the_classes_policy_at_the_service(tmp_path: Path) -> None:
    service = ServiceWithPolicies([node(1, "accepted", MI300X)])
    settings = AgentConfig(**REQUIRED, state_dir=str(tmp_path / "state"))  # no gpu_vendors
    agent = Agent(settings, client_for(service), amd_executor(tmp_path, "true"), AgentState(settings.state_dir))

    report = agent.sweep_inventory()

    assert report.skipped == [] and report.reported == 1
    assert service.posted[0]["devices"][0]["inventory"]["gpus"][0]["product_name"] == "AMD Instinct MI350X"
