"""The remediation ladder's reboot on a real Slurm (docs/remediation.md, docs/agent.md "Remediation steps"): the
Slurm executor asks `scontrol reboot ASAP nextstate=RESUME` with a `fleet-burnin:` reason, and never for a node
someone else drained (the node gate's ownership rules). The private cluster's fake nodes cannot restart, so each
test cancels what it asked (`scontrol cancel_reboot`) and leaves the cluster as it found it."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from fleet_agent.executors.base import RemedyRun, Target
from fleet_agent.executors.slurm import SlurmExecutor, SlurmSettings
from tests.slurm.conftest import Slurm
from tests.slurm.test_node_gate import DCGM_PASS, _reset, clean, node_field, state

__all__ = ["clean"]  # the fixture, shared with the node gate's tests

pytestmark = pytest.mark.slurm


def executor(slurm: Slurm, tmp_path: Path) -> SlurmExecutor:
    return SlurmExecutor(
        {"t": {"template": slurm.replay(DCGM_PASS), "parser": "dcgm-diag-json"}},
        SlurmSettings(output_dir=str(tmp_path / "out"), node_names={"a01-n01": "n1", "a01-n02": "n2"}),
        timeout_s=60,
        environ=dict(os.environ) | slurm.env,
    )


def reboot(slurm: Slurm, tmp_path: Path, hostname: str):
    return executor(slurm, tmp_path).remedy(RemedyRun("reboot", Target("d", hostname, "gpu.h200.8x")))


def test_a_node_someone_else_drained_is_never_rebooted(clean: Slurm, tmp_path: Path) -> None:
    clean.command("scontrol", "update", "NodeName=n2", "State=DRAIN", "Reason=ops: swapping a PSU")
    before = (state(clean, "n2"), node_field(clean, "n2", "Reason"))

    done = reboot(clean, tmp_path, "a01-n02")

    assert not done.ok and done.detail == "n2: the node is drained by someone else (ops: swapping a PSU): not rebooted"
    assert (state(clean, "n2"), node_field(clean, "n2", "Reason")) == before
    assert "REBOOT" not in node_field(clean, "n2", "State")


def test_a_burn_in_node_is_rebooted_asap_with_the_gates_reason(clean: Slurm, tmp_path: Path) -> None:
    # a job holds n1, so the reboot waits for it (ASAP: drained meanwhile) and can be cancelled before it runs
    held = clean.command(
        "sbatch", "--parsable", "--nodelist=n1", f"--output={tmp_path / 'held.out'}", "--wrap", "sleep 120"
    )
    assert held.returncode == 0, held.stderr
    job = held.stdout.strip().split(";")[0]
    try:
        wait_running(clean, job)

        done = reboot(clean, tmp_path, "a01-n01")

        assert done.ok and done.detail == "scontrol reboot ASAP nextstate=RESUME n1", done.detail
        shown = node_field(clean, "n1", "State")
        assert "REBOOT_REQUESTED" in shown and "DRAIN" in shown, shown
        assert node_field(clean, "n1", "Reason") == "fleet-burnin: remediation reboot"  # the gate's own: ownership kept
    finally:
        clean.command("scontrol", "cancel_reboot", "n1")
        clean.command("scancel", job)
        _reset(clean)


def wait_running(slurm: Slurm, job: str) -> None:
    deadline = time.monotonic() + 30
    while slurm.job_field(job, "JobState") != "RUNNING":
        assert time.monotonic() < deadline, slurm.job_field(job, "JobState")
        time.sleep(0.2)
