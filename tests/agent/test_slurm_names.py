"""Issue 42 (6): a Slurm node name is validated against Slurm's own grammar before it is written
anywhere — the batch script, `--nodelist`, the node gate's `scontrol` — by one rule
(`fleet_rules.node_gate.slurm_node_name_problem`) shared by the Slurm executor and the node gate.
A name holding a newline (from the service's hostname or the `slurm_node_names` mapping) used to
land on its own line of the generated script and run as a command."""

from __future__ import annotations

from pathlib import Path

import pytest

from fleet_agent.executors.base import Target, TestRun
from fleet_agent.executors.slurm import SlurmExecutor, SlurmSettings
from fleet_rules import node_gate
from fleet_rules.node_gate import GatedDevice, gate_plan
from fleet_rules.vocabulary import DeviceState, NodeGateSkip

HOSTILE = ["n1\ntouch /tmp/pwned", "n1;reboot", "n1 n2", "$(id)", "n[1-2]", "n1,n2", "", "-n1", "n" * 65]


@pytest.mark.parametrize("name", ["n1", "gpu-a01-07", "node_12.rack3", "N1"])
def test_slurm_node_names_slurm_accepts_pass(name: str) -> None:
    assert node_gate.slurm_node_name_problem(name) is None


@pytest.mark.parametrize("name", HOSTILE)
def test_names_outside_slurms_grammar_are_refused(name: str) -> None:
    assert node_gate.slurm_node_name_problem(name)


def _run(hostname: str) -> TestRun:
    return TestRun(requirement="r", test="t", parameters={}, targets=(Target("dev-1", hostname, "gpu.h200.8x"),))


@pytest.mark.parametrize(
    ("mapping", "hostname"),
    [({}, "host-1\ntouch /tmp/pwned"), ({"host-1": "n1"}, "host-2;reboot")],
    ids=["the service's hostname", "a hostname the mapping does not name"],
)
def test_a_node_name_that_is_not_slurms_errors_the_run_before_any_script_is_written(
    tmp_path: Path, mapping: dict[str, str], hostname: str
) -> None:
    out = tmp_path / "out"
    executor = SlurmExecutor(
        {"t": {"template": "true", "parser": "dcgm-diag-json"}},
        SlurmSettings(output_dir=str(out), node_names=mapping, bin_dir=str(tmp_path / "no-slurm")),
        timeout_s=5,
    )

    outcome = executor.run(_run(hostname), attempt=1)

    assert outcome.status == "errored"
    assert "is not a Slurm node name" in (outcome.error or ""), outcome.error
    assert not list(out.glob("*.sh")) if out.exists() else True


def test_the_config_refuses_a_mapping_to_a_name_slurm_would_not_take() -> None:
    with pytest.raises(ValueError, match="slurm_node_names"):
        SlurmSettings(node_names={"host-1": "n1\nreboot"}).check()
    with pytest.raises(ValueError, match="slurm_node_name"):
        SlurmSettings(node_name="{hostname} x").check()


def test_the_node_gate_leaves_a_device_whose_node_name_is_not_slurms_alone() -> None:
    devices = [
        GatedDevice("host-1", "n1\nreboot", DeviceState.NEEDS_REPAIR),
        GatedDevice("host-2", "n2", DeviceState.NEEDS_REPAIR),
    ]
    plan = gate_plan(devices, {}, [])
    assert [s.skip for s in plan.skipped if s.hostname == "host-1"] == [NodeGateSkip.NOT_A_NODE_NAME]
    assert all(c.hostname != "host-1" for c in plan.changes)
