"""The agent's side of the remediation ladder (docs/remediation.md): a `remediation` job's step taken before its
burn-in, with configured commands or on the simulated node, and a failing step failing the job."""

from __future__ import annotations

from pathlib import Path

import pytest

from fleet_agent.executors.base import RemedyRun, Target
from fleet_agent.executors.command import CommandExecutor
from fleet_agent.executors.hardware import HEALTH_WINDOW_TEST
from fleet_agent.executors.remedies import remedy_take
from fleet_agent.executors.simulated_hardware import SimulatedHardware, parse_health_faults

TARGET = Target("d-1", "a01-n02", "gpu.h200.8x")
JOB = {
    "parameters": {"remedy": {"id": "s-1", "step": "reset_gpu", "gpus": ["0000:3b:00"], "reason": "Xid 95"}},
    "devices": [{"id": "d-1", "hostname": "a01-n02", "resource_class": "gpu.h200.8x"}],
}


def nvidia(_: str) -> str:
    return "nvidia"


def executor(tmp_path: Path, **remedy_commands: object) -> CommandExecutor:
    return CommandExecutor({"noop": {"template": "true", "parser": "nvbandwidth"}}, remedy_commands=remedy_commands)


@pytest.mark.process
def test_a_reset_runs_its_command_with_the_gpu_filled_in(tmp_path: Path) -> None:
    seen = tmp_path / "seen"
    run = executor(tmp_path, reset_gpu=f"sh -c 'echo $0 $1 > {seen}' {{hostname}} {{gpu}}")

    assert remedy_take(run, JOB, nvidia, lambda: False) is None
    assert seen.read_text().split() == ["a01-n02", "0000:3b:00"]


@pytest.mark.process
def test_a_failing_step_fails_with_what_the_tool_said(tmp_path: Path) -> None:
    run = executor(tmp_path, reset_gpu="sh -c 'echo GPU is busy >&2; exit 3'")

    failed = remedy_take(run, JOB, nvidia, lambda: False)

    assert failed is not None and failed.startswith("the reset_gpu step failed: ") and "GPU is busy" in failed


def test_a_step_without_a_command_fails_rather_than_guessing(tmp_path: Path) -> None:
    failed = remedy_take(executor(tmp_path), JOB, nvidia, lambda: False)

    assert failed == "the reset_gpu step failed: no command configured for reset_gpu (remedy_commands.reset_gpu)"


def test_a_job_without_a_step_takes_none(tmp_path: Path) -> None:
    assert remedy_take(executor(tmp_path), {"parameters": {}, "devices": []}, nvidia, lambda: False) is None


def test_unknown_remedy_commands_stop_the_agent_at_start(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="remedy_commands: unknown key"):
        executor(tmp_path, reboot_now="true")


def _xids(hardware: SimulatedHardware) -> list[str]:
    from datetime import UTC, datetime

    log = hardware.read("kernel_log", TARGET, phase="after", since=datetime.now(UTC), until=datetime.now(UTC))
    return [line.split("): ")[1].split(",")[0] for line in (log.text or "").splitlines()]


def test_the_simulated_node_cures_a_transient_xid_with_a_step_and_keeps_a_persisting_one(tmp_path: Path) -> None:
    transient = SimulatedHardware(parse_health_faults("a01-n02:transient=95"), tmp_path / "swaps.json")
    persisting = SimulatedHardware(parse_health_faults("a01-n02:xid=95"), tmp_path / "other" / "swaps.json")
    assert _xids(transient) == ["95"] and _xids(persisting) == ["95"]

    for hardware in (transient, persisting):
        assert hardware.remedy(RemedyRun("reset_gpu", TARGET, ("0000:19:00",))).ok

    assert _xids(transient) == [] and _xids(persisting) == ["95"]
    # another agent process over the same state directory remembers the step
    again = SimulatedHardware(parse_health_faults("a01-n02:transient=95"), tmp_path / "swaps.json")
    assert _xids(again) == []
    assert HEALTH_WINDOW_TEST  # the window is what reads it


@pytest.mark.process
def test_a_gpu_that_is_not_a_pci_bus_id_is_never_a_command_word(tmp_path: Path) -> None:
    """The bus id comes from a kernel log of the machine under test: `ssh host cmd {gpu}` would hand it to the
    remote shell. Anything but a PCI bus id fails the step and runs nothing."""
    seen = tmp_path / "seen"
    run = executor(tmp_path, reset_gpu=f"sh -c 'echo $0 > {seen}' {{gpu}}")
    hostile = {**JOB, "parameters": {"remedy": {**JOB["parameters"]["remedy"], "gpus": ["0000:3b:00;reboot"]}}}

    failed = remedy_take(run, hostile, nvidia, lambda: False)

    assert failed is not None and "not a PCI bus id" in failed
    assert not seen.exists()
