"""The Slurm executor runs AMD's tools as it runs NVIDIA's: rvs on the device's node, rccl-tests as one step across
the rack, and an AMD node's hardware read by steps with `amd-smi` (the "tools" replay real AMD outputs)."""

from __future__ import annotations

from pathlib import Path

from fleet_agent.executors.base import Target, TestRun
from fleet_agent.executors.hardware import collect_inventory
from tests.slurm.conftest import Slurm
from tests.slurm.test_slurm_executor import Ledger, executor, steps_of

MI300X = "gpu.mi300x.8x"


def amd_run(*hosts: str, test: str, execution_id: str | None = None) -> TestRun:
    targets = tuple(Target(f"dev-{h}", h, MI300X, "amd") for h in hosts)
    return TestRun(requirement=test, test=test, parameters={}, targets=targets, execution_id=execution_id)


def test_rvs_and_a_rack_rccl_collective_run_as_slurm_steps_and_are_parsed(slurm: Slurm, tmp_path: Path) -> None:
    ledger = Ledger()
    commands = {
        "rvs-stress": {"template": slurm.replay("amd/rvs_1.x_mi355x_gst_fp4.txt"), "parser": "rvs"},
        "rccl-all-reduce-multinode": {
            "template": slurm.replay("amd/rccl_tests_rocm6.4.2_rccl2.22.3_mi300x_2node.txt"),
            "parser": "rccl-tests",
        },
    }
    slurm_executor = executor(slurm, commands, tmp_path, ledger)

    stress = slurm_executor.run(amd_run("host-1", test="rvs-stress", execution_id="a1"), attempt=1)
    rack = slurm_executor.run(
        amd_run("host-1", "host-2", "host-3", "host-4", test="rccl-all-reduce-multinode", execution_id="a2"),
        attempt=1,
    )

    assert stress.status == "completed", stress.error
    assert stress.metrics["gst_failed_gpus"] == {"value": 0}
    assert [(node, rank) for _, node, rank in steps_of(slurm, ledger.records["a1"]["job_id"])] == [("n1", "0")]
    assert rack.status == "completed", rack.error
    assert rack.metrics["busbw_gbps"]["value"] == 357.46
    steps = steps_of(slurm, ledger.records["a2"]["job_id"])
    assert sorted(node for _, node, _ in steps) == ["n1", "n2", "n3", "n4"]


def test_an_amd_nodes_inventory_is_read_by_an_amd_smi_step_on_its_node(slurm: Slurm, tmp_path: Path) -> None:
    slurm_executor = executor(
        slurm,
        {"rvs-stress": {"template": slurm.replay("amd/rvs_1.x_mi355x_gst_fp4.txt"), "parser": "rvs"}},
        tmp_path,
        hardware_commands={
            "gpu_inventory": {"amd": slurm.replay("amd/amd_smi_static_rocm7_mi350x_derived_from_text.json")},
            "ibstat": slurm.replay("ibstat_h100_all_active.txt"),
        },
    )
    before = len(slurm.steps())

    inventory = collect_inventory(slurm_executor.hardware, Target("dev-host-2", "host-2", MI300X, "amd"))

    assert inventory["gpus"][0]["product_name"] == "AMD Instinct MI350X" and inventory["driver_version"] == "6.18.3"
    assert [(on, rank) for _, on, rank in slurm.steps()[before:]] == [("n2", "0"), ("n2", "0")]


def test_an_amd_nodes_health_window_is_read_by_steps_and_judges_its_amdgpu_events(slurm: Slurm, tmp_path: Path) -> None:
    slurm_executor = executor(
        slurm,
        {"rvs-stress": {"template": slurm.replay("amd/rvs_1.x_mi355x_gst_fp4.txt"), "parser": "rvs"}},
        tmp_path,
        hardware_commands={
            "gpu_health": {"amd": slurm.replay("amd/amd_smi_metric_rocm7_mi300x_derived_umc_sdma_errors.json")},
            "kernel_log": slurm.replay("amd/kernel_log_amdgpu_rocm6.2.3_mi300x_ras_athub.log"),
        },
    )

    outcome = slurm_executor.run(amd_run("host-4", test="health-window"), attempt=1)

    assert outcome.status == "completed", outcome.error
    assert outcome.metrics["amdgpu_ras_fatal_count"]["value"] >= 1  # the ATHUB RAS interrupt of ROCm issue 4021
    assert outcome.metrics["ecc_uncorrected_delta"]["value"] == 0 and outcome.metrics["gpu_count"]["value"] == 2
    assert outcome.health is not None and outcome.health["xid_events"][0]["kind"] == "amdgpu"
