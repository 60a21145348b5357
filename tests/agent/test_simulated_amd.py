"""The simulated AMD Instinct rack: its tools' outputs read by the real parsers, judged by the example's
`gpu.mi300x.8x` policy as real ones would be — healthy nodes pass, each fault fails exactly its tests — and the agent
reads an AMD node with AMD's tools (its class's vendor from the configuration, else the simulation's model)."""

from __future__ import annotations

import itertools
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from fleet_agent.config import ConfigError, load_config
from fleet_agent.executors import SimulatedExecutor, Target, TestRun
from fleet_agent.executors.command import CommandExecutor
from fleet_agent.executors.hardware import HEALTH_WINDOW_TEST, collect_inventory, health_snapshot
from fleet_agent.executors.simulated_amd import AMD_FAULT_MODES, AMD_MULTINODE_TEST
from fleet_agent.executors.simulated_hardware import SIMULATED_SWAPS, gpu_serial, parse_health_faults
from fleet_agent.parsers import PARSER_NAMES
from fleet_agent.targets import GpuVendorBook, device_target
from fleet_rules.amdgpu import is_fatal_amdgpu
from fleet_rules.evaluator import evaluate
from fleet_rules.gpu_vendors import VENDOR_PARSERS
from tests.agent.test_simulated_executor import REQUIREMENTS, Requirement, run_of

MI300X = "gpu.mi300x.8x"
SINGLE = [req for req in REQUIREMENTS[MI300X] if not req.multi_node and req.test != HEALTH_WINDOW_TEST]
RACK = next(req for req in REQUIREMENTS[MI300X] if req.multi_node)
WINDOW = next(req for req in REQUIREMENTS[MI300X] if req.test == HEALTH_WINDOW_TEST)


def amd(name: str) -> Target:
    return Target(device_id=f"id-{name}", hostname=name, resource_class=MI300X, gpu_vendor="amd")


def judged(requirement: Requirement, outcome: Any) -> dict[str, Any]:
    metrics = json.loads(json.dumps(outcome.metrics, allow_nan=False))
    return evaluate(status=outcome.status, metrics=metrics, rules=requirement.rules, error=outcome.error)


def hosts(executor: SimulatedExecutor, *, mode: str | None = None) -> Any:
    """Hostnames whose AMD device is healthy (mode None) or has `mode`."""
    for number in itertools.count():
        fault = executor.fault_of(amd(f"c-{number:04d}"))
        if (fault is None and mode is None) or (fault is not None and fault.mode == mode):
            yield f"c-{number:04d}"


def test_the_example_policy_judges_the_amd_tests_the_simulation_models() -> None:
    assert {req.test for req in REQUIREMENTS[MI300X]} == {
        "rvs-stress",
        "transferbench-a2a",
        "rccl-all-reduce",
        AMD_MULTINODE_TEST,
        HEALTH_WINDOW_TEST,
    }


def test_healthy_mi300x_nodes_pass_every_test_and_their_rack_collective() -> None:
    executor = SimulatedExecutor(seed=7, faulty_share=0.3, slow_share=0.0)
    healthy = list(itertools.islice(hosts(executor), 6))
    for name, requirement, attempt in itertools.product(healthy, SINGLE, (1, 2)):
        outcome = executor.run(run_of(requirement, amd(name)), attempt=attempt)
        assert outcome.status == "completed", outcome.error
        assert judged(requirement, outcome)["passed"], (name, requirement.test, outcome.metrics)
    rack = executor.run(run_of(RACK, *map(amd, healthy[:4]), topology="rack-c01"), attempt=1)
    assert judged(RACK, rack)["passed"], rack.metrics
    assert rack.metrics["busbw_gbps"]["unit"] == "GB/s" and rack.metrics["wrong"] == {"value": 0}


@pytest.mark.parametrize("mode", sorted(AMD_FAULT_MODES))
def test_a_permanent_amd_fault_fails_exactly_its_tests(mode: str) -> None:
    executor = SimulatedExecutor(seed=8, faulty_share=1.0, transient_share=0.0)
    name = next(hosts(executor, mode=mode))
    for requirement, attempt in itertools.product(SINGLE, (1, 3)):
        result = judged(requirement, executor.run(run_of(requirement, amd(name)), attempt=attempt))
        assert result["passed"] is (requirement.test not in AMD_FAULT_MODES[mode]), (requirement.test, result)


def test_a_slow_xgmi_link_shows_as_transferbench_slowest_copy_and_slows_the_rack() -> None:
    executor = SimulatedExecutor(seed=9, faulty_share=0.3, transient_share=0.0)
    slow = next(hosts(executor, mode="xgmi_slow"))
    a2a = next(req for req in SINGLE if req.test == "transferbench-a2a")

    outcome = executor.run(run_of(a2a, amd(slow)), attempt=2)

    failed = judged(a2a, outcome)["metric_evaluations"]["a2a_min_link_gbps"]
    assert not failed["passed"] and outcome.metrics["a2a_min_link_gbps"]["value"] < 20
    healthy = list(itertools.islice(hosts(executor), 3))
    rack = executor.run(run_of(RACK, *map(amd, [*healthy, slow]), topology="rack-c01"), attempt=2)
    assert judged(RACK, rack)["reason"].startswith("busbw_gbps")


@pytest.mark.parametrize(
    ("fault", "failing", "event"),
    [
        ("ecc", {"amdgpu_ras_fatal_count", "ecc_uncorrected_delta"}, "2 uncorrectable hardware errors detected in UMC"),
        ("reset", {"amdgpu_ras_fatal_count"}, "GPU reset begin!"),
        ("ras", {"amdgpu_ras_fatal_count"}, "uncorrectable hardware error(ERREVENT_ATHUB_INTERRUPT) detected!"),
        ("slowdown", {"hw_slowdown_seen"}, None),
    ],
)
def test_each_amd_health_fault_fails_the_window_on_its_metrics(fault: str, failing: set[str], event: str | None):
    executor = SimulatedExecutor(seed=1, faulty_share=0.0, health_faults=parse_health_faults(f"c01-n02:{fault}"))
    target = amd("c01-n02")
    since = datetime.now(UTC) - timedelta(minutes=20)
    before = health_snapshot(executor.hardware, target, "before")
    run = TestRun("gpu-health-window", HEALTH_WINDOW_TEST, {}, (target,), window_since=since, health_before=before)

    outcome = executor.run(run, attempt=1)

    verdict = judged(WINDOW, outcome)
    assert {m for m, r in verdict["metric_evaluations"].items() if not r["passed"]} == failing
    assert outcome.health is not None
    if event is not None:
        fatal = [e for e in outcome.health["xid_events"] if is_fatal_amdgpu(e["code"])]
        assert fatal[0]["kind"] == "amdgpu" and event in fatal[0]["message"]
        assert fatal[0]["pci_bus_id"] == "0000:05:00.0"
    healthy = executor.run(TestRun("w", HEALTH_WINDOW_TEST, {}, (amd("c01-n03"),)), attempt=1)
    assert judged(WINDOW, healthy)["passed"], healthy.metrics


def test_an_amd_inventory_is_read_from_amd_smi_static_and_a_swap_changes_one_serial(tmp_path: Path) -> None:
    executor = SimulatedExecutor(seed=1, swaps_file=tmp_path / SIMULATED_SWAPS)
    target = amd("c01-n01")

    before = collect_inventory(executor.hardware, target)
    (tmp_path / SIMULATED_SWAPS).write_text(json.dumps({"c01-n01": [3]}))
    after = collect_inventory(executor.hardware, target)

    assert before["missing"] == [] and len(before["gpus"]) == 8
    assert before["gpus"][0]["product_name"] == "AMD Instinct MI300X"
    assert before["gpus"][0]["pci_bus_id"] == "0000:05:00.0" and before["driver_version"] == "6.10.5"
    assert [g["serial"] for g in before["gpus"]] == [gpu_serial(target.device_id, i) for i in range(8)]
    changed = [i for i in range(8) if before["gpus"][i]["serial"] != after["gpus"][i]["serial"]]
    assert changed == [3] and after["gpus"][3]["serial"] == gpu_serial(target.device_id, 3, 1)


def test_an_amd_node_read_as_nvidia_finds_no_nvidia_smi_and_an_nvidia_test_errors() -> None:
    executor = SimulatedExecutor(seed=1)
    wrong = Target("id-x", "c01-n01", MI300X)  # the agent was not told the class is AMD's

    inventory = collect_inventory(executor.hardware, wrong)
    outcome = executor.run(TestRun("gpu-diag", "dcgm-diag", {"level": 3}, (amd("c01-n01"),)), attempt=1)

    assert inventory["gpus"] == [] and inventory["missing"][0].startswith(
        "nvidia-smi: command not found (the simulated gpu.mi300x.8x has amd"
    )
    assert outcome.status == "errored" and "gpu.mi300x.8x has AMD GPUs" in (outcome.error or "")


def test_the_agent_learns_a_class_vendor_from_its_configuration_the_service_or_the_simulations_model(
    caplog: pytest.LogCaptureFixture,
) -> None:
    settings = {"api": "http://x", "site": "s", "satellite": "t", "client_id": "i", "client_secret": "c"}
    configured = load_config(settings, environ={"FLEET_AGENT_GPU_VENDORS": "gpu.pinned.8x=amd, gpu.h200.8x=nvidia"})
    answers: list[dict[str, str]] = [{"gpu.served.8x": "amd", "gpu.pinned.8x": "nvidia", "gpu.odd": "intel"}]
    now = [0.0]

    def ask() -> dict[str, str]:
        if not answers:
            raise ConnectionError("the service is unreachable")
        return answers.pop(0)

    book = GpuVendorBook(configured.gpu_vendors, executor=SimulatedExecutor(seed=1), ask=ask, clock=lambda: now[0])

    def vendor(device: dict[str, str]) -> str:
        return device_target(device, book).gpu_vendor

    assert configured.gpu_vendors == {"gpu.pinned.8x": "amd", "gpu.h200.8x": "nvidia"}
    assert vendor({"id": "d", "hostname": "h", "resource_class": "gpu.pinned.8x"}) == "amd"  # the site pinned it
    assert vendor({"id": "d", "hostname": "h", "resource_class": "gpu.served.8x"}) == "amd"  # its policy says so
    assert answers == []  # asked once
    assert vendor({"device_id": "d", "hostname": "h", "resource_class": MI300X}) == "amd"  # the simulation's model
    assert vendor({"id": "d", "hostname": "h", "resource_class": "gpu.odd"}) == "nvidia"  # not a vendor: ignored
    now[0] += 61  # a minute later a class the service did not know is asked about again; a failure is logged
    with caplog.at_level("WARNING", logger="fleet_agent.targets"):
        assert vendor({"id": "d", "hostname": "h", "resource_class": "gpu.new"}) == "nvidia"
    assert "could not learn the resource classes' GPU vendors from the service" in caplog.text
    with pytest.raises(ConfigError, match="gpu_vendors.gpu.x: 'intel' is not a GPU vendor"):
        load_config(settings | {"gpu_vendors": "gpu.x=intel"})
    with pytest.raises(ConfigError, match="gpu_vendors: 'gpu.x' is not <resource_class>=<vendor>"):
        load_config(settings | {"gpu_vendors": "gpu.x"})


def test_a_command_whose_parser_reads_another_vendors_tool_stops_the_agent_at_start() -> None:
    assert set().union(*VENDOR_PARSERS.values()) <= set(PARSER_NAMES)
    with pytest.raises(ValueError, match="commands.rvs-stress.parser: dcgm-diag-json reads a nvidia tool's output"):
        CommandExecutor({"rvs-stress": {"template": "rvs -c gst.conf", "parser": "dcgm-diag-json"}})
    with pytest.raises(ValueError, match="commands.dcgm-diag.parser: rvs reads a amd tool's output"):
        CommandExecutor({"dcgm-diag": {"template": "dcgmi diag -r 3 -j", "parser": "rvs"}})
    CommandExecutor({"rvs-stress": {"template": "rvs -c gst.conf", "parser": "rvs"}})
