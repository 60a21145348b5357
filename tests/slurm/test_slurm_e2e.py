"""The whole system on Slurm: a real `fleet serve`, real `fleet-agent --executor slurm` processes and a real
Slurm whose steps print recorded real tool outputs. Fleet hostnames map onto the fake nodes n1..n4."""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from fleet.burnin.models import FingerprintSnapshot, PolicyProgress, RemedyStep, TestExecution
from fleet.jobs.models import Job, JobDevice
from fleet.lifecycle.models import DeviceStateChange
from fleet_rules.vocabulary import JobReason
from tests.slurm.conftest import FIXTURES, REPLAY, Slurm
from tests.slurm.test_node_gate import _reset
from tests.support.stack import Stack, running_stack, sat_a_devices

NO_XID = "kernel_log_journalctl_short_iso_no_xid.log"
SMI_FIELDS = "index,remapped_rows.pending,remapped_rows.failure,ecc.errors.uncorrected.volatile.sram,temperature.gpu"


@pytest.fixture
def long_lease_stack(transactional_db, settings, tmp_path):  # type: ignore[no-untyped-def]
    """A stack whose job leases (30 s) outlast an agent restart."""
    with running_stack(settings, tmp_path, lease_seconds=30) as running:
        yield running


def agent_config(
    slurm: Slurm, tmp_path: Path, commands: dict[str, Any], hardware_commands: dict[str, Any] | None = None
) -> str:
    """A config file for `fleet-agent --executor slurm`: every a0R-n0N host runs on fake node nN."""
    hostnames = {f"a0{rack}-n0{node}": f"n{node}" for rack in range(1, 5) for node in range(1, 5)}
    path = tmp_path / "agent-slurm.yaml"
    path.write_text(
        yaml.safe_dump(
            {
                "executor": "slurm",
                "commands": commands,
                "hardware_commands": hardware_commands or {},
                "command_timeout": 60,
                "slurm_partition": "burnin",
                "slurm_mpi": "none",
                "slurm_node_names": hostnames,
                "slurm_output_dir": str(tmp_path / "slurm-out"),
                "slurm_poll_interval": 0.2,
                "slurm_time_margin": 0,
            }
        )
    )
    return str(path)


def verdicts(hostname: str) -> dict[str, str]:
    rows = PolicyProgress.objects.filter(device__hostname=hostname).select_related("requirement")
    return {row.requirement.name: row.verdict for row in rows}


def wait_for(condition, what: str, timeout: float = 60, agent=None) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        if agent is not None:
            assert agent.poll() is None, agent.stderr.read()[-3000:]
        time.sleep(0.2)


def slurm_jobs_on(slurm: Slurm, node: str, since: int) -> list[str]:
    return sorted({step.split(".")[0] for step, on, _ in slurm.steps()[since:] if on == node}, key=int)


def test_a_single_node_job_runs_each_test_as_a_slurm_step_then_is_evaluated_and_reconciled(
    slurm: Slurm, stack: Stack, tmp_path: Path
) -> None:
    device = sat_a_devices()[0]
    assert device.hostname == "a01-n01"
    commands = {
        "dcgm-diag": {"template": slurm.replay("dcgm_diag_r3_h200_pass_dcgm3.json"), "parser": "dcgm-diag-json"},
        "gpu-health": {
            "template": slurm.replay("nvidia_smi_h200_pending_remap.csv"),
            "parser": f"nvidia-smi-csv:{SMI_FIELDS},clocks.sm,power.draw",
        },
        "nvbandwidth": {"template": slurm.replay("nvbandwidth_v0.7_a100_assert.txt"), "parser": "nvbandwidth"},
        "nccl-all-reduce": {"template": slurm.replay("nccl_2.13plus_h100_2node.txt"), "parser": "nccl-all-reduce"},
    }
    hardware = {
        "nvidia_smi": slurm.replay("nvidia_smi_q_x_r535_a100_sxm4.xml"),
        "ibstat": slurm.replay("ibstat_h100_all_active.txt"),
        "kernel_log": slurm.replay("kernel_log_journalctl_short_iso_no_xid.log"),
    }
    config = agent_config(slurm, tmp_path, commands, hardware)
    stack.agent("once", "--config", config, **slurm.env)
    before = len(slurm.steps())
    stack.dispatch([device.id])

    stack.agent("once", "--config", config, **slurm.env)

    assert verdicts("a01-n01") == {
        "gpu-diag": "passed",  # a real passing DCGM 3 run
        "gpu-health": "failed",  # a pending row remap
        "nvbandwidth": "errored",  # the tool hit an ASSERT: not a verdict on the hardware
        "nccl-in-node": "failed",  # 338.82 GB/s < 431
        "hbm-bandwidth": "errored",  # no command configured for it
        "ib-bandwidth": "errored",
        # judged from steps on n1, not errored: no Xid in the window and no slowdown, but this A100's nvidia-smi
        # (R535) reports row remapping N/A, and a reading that is missing fails closed
        "gpu-health-window": "failed",
    }
    # one Slurm job (one step) per configured test, and one per hardware reading: nvidia-smi and ibstat at the
    # job's start, nvidia-smi and the kernel log at the end of the health window
    assert len(slurm_jobs_on(slurm, "n1", before)) == 4 + 4
    assert {on for _, on, _ in slurm.steps()[before:]} == {"n1"}
    (snapshot,) = FingerprintSnapshot.objects.filter(device=device)
    assert snapshot.inventory["driver_version"] == "535.54.03" and len(snapshot.inventory["gpus"]) == 1
    window = TestExecution.objects.get(requirement__name="gpu-health-window", device=device)
    assert window.status == "completed" and window.health["source"] == "journalctl"
    assert window.metrics["xid_fatal_count"]["value"] == 0 and "value" not in window.metrics["row_remap_pending"]
    assert window.fingerprint_sha256 == snapshot.sha256
    nccl = TestExecution.objects.get(requirement__name="nccl-in-node", device=device)
    assert nccl.metrics["busbw_gbps"]["value"] == 338.82
    assert "Invalid value when checking the pattern" in TestExecution.objects.get(requirement__name="nvbandwidth").error
    assert Job.objects.get().status == "failed"  # some executions errored
    assert not JobDevice.objects.filter(active=True).exists()


def test_a_rack_collective_runs_as_one_step_across_every_node_of_the_rack(
    slurm: Slurm, stack: Stack, tmp_path: Path
) -> None:
    rack = sat_a_devices()[:4]
    stack.agent("once")
    stack.dispatch([d.id for d in rack])
    stack.agent("once", FLEET_AGENT_FAULTY_SHARE="0")  # the single-node burn-in passes (simulated)
    dispatched = stack.dispatch([d.id for d in rack])
    assert [job["workflow_name"] for job in dispatched["created_jobs"]] == ["MultiNodeBurnInCollectiveWorkflow"]
    commands = {
        "nccl-all-reduce-multinode": {
            "template": slurm.replay("nccl_rccl_all_reduce_then_alltoall_named.txt"),
            "parser": "nccl-all-reduce",
        }
    }
    before = len(slurm.steps())

    stack.agent("once", "--config", agent_config(slurm, tmp_path, commands), **slurm.env)

    steps = slurm.steps()[before:]
    assert len({step for step, _, _ in steps}) == 1
    assert sorted((on, rank) for _, on, rank in steps) == [("n1", "0"), ("n2", "1"), ("n3", "2"), ("n4", "3")]
    row = PolicyProgress.objects.get(topology__label="rack-a01", requirement__name="rack-nccl")
    assert row.verdict == "passed"
    execution = TestExecution.objects.get(topology__label="rack-a01")
    assert execution.metrics["busbw_gbps"]["value"] == 406.76  # the all_reduce table, not the alltoall one


def test_a_rack_collectives_member_windows_are_read_on_each_node_and_a_nodes_own_xid_takes_its_ladder(
    slurm: Slurm, stack: Stack, tmp_path: Path
) -> None:
    """`member_health` on Slurm (docs/remediation.md, "Bursts"): after the collective's step, each member node's
    kernel log is read by a one-task step on that node; the one node whose log has an Xid 79 and SXids 20034 (1 of
    4: not the workload's) takes its own ladder when the collective's job ends: a reboot through `scontrol` (the
    private cluster's nodes cannot restart: cancelled after), the burn-in after it errors (no command for it
    here), the step fails and the ladder, exhausted, sends the device to repair. The other three are accepted."""
    rack = sat_a_devices()[:4]
    stack.agent("once")
    stack.dispatch([d.id for d in rack])
    stack.agent("once", FLEET_AGENT_FAULTY_SHARE="0")  # the single-node burn-in passes (simulated)
    dispatched = stack.dispatch([d.id for d in rack])
    assert [job["workflow_name"] for job in dispatched["created_jobs"]] == ["MultiNodeBurnInCollectiveWorkflow"]
    logs = tmp_path / "kernel-logs"
    logs.mkdir()
    for device in rack:  # each node prints its own kernel log: only a01-n01's logged anything
        fixture = "kernel_log_dmesg_xid79_sxid20034.log" if device.hostname == "a01-n01" else NO_XID
        (logs / f"{device.hostname}.log").write_text((FIXTURES / fixture).read_text())
    commands = {
        "nccl-all-reduce-multinode": {
            "template": slurm.replay("nccl_rccl_all_reduce_then_alltoall_named.txt"),
            "parser": "nccl-all-reduce",
        }
    }
    hardware = {"kernel_log": f"{REPLAY} {logs}/{{hostname}}.log 0 0"}
    before = len(slurm.steps())

    try:
        stack.agent("once", "--config", agent_config(slurm, tmp_path, commands, hardware), **slurm.env)
    finally:
        slurm.command("scontrol", "cancel_reboot", "n1")
        _reset(slurm)

    execution = TestExecution.objects.get(topology__label="rack-a01")
    assert execution.status == "completed" and execution.error == ""  # one node of four: not the workload's
    # the collective's step across the rack, then one kernel-log step on each node, each a Slurm job of its own
    steps = slurm.steps()[before:]
    jobs = sorted({int(step.split(".")[0]) for step, _, _ in steps})
    collective, *reads = jobs[:5]
    assert sorted(rank for step, _, rank in steps if int(step.split(".")[0]) == collective) == ["0", "1", "2", "3"]
    assert [(on, rank) for job in reads for step, on, rank in steps if int(step.split(".")[0]) == job] == [
        ("n1", "0"),
        ("n2", "0"),
        ("n3", "0"),
        ("n4", "0"),
    ]
    (step,) = RemedyStep.objects.all()
    assert (step.device.hostname, step.step) == ("a01-n01", "reboot")
    assert step.reason.startswith("Xid 79 (GPU has fallen off the bus) on GPU 0000:91:00: reboot asked")
    assert step.job is not None and step.job.reason == JobReason.REMEDIATION
    assert step.job.parameters["remedy"]["step"] == "reboot" and "rack-nccl" not in step.job.requirement_names
    assert (step.outcome, step.result) == ("failed", "an execution errored")
    moves = DeviceStateChange.objects.filter(device__in=rack)
    assert sorted(moves.values_list("device__hostname", "to_state", "cause")) == [
        ("a01-n01", "needs_repair", "fatal_xid"),
        ("a01-n02", "accepted", "certificate_issued"),
        ("a01-n03", "accepted", "certificate_issued"),
        ("a01-n04", "accepted", "certificate_issued"),
    ]
    assert "the ladder is exhausted in 24 h: reboot at " in moves.get(device__hostname="a01-n01").reason


def test_cancelling_the_fleet_job_scancels_the_slurm_job(slurm: Slurm, stack: Stack, tmp_path: Path) -> None:
    device = sat_a_devices()[1]
    commands = {
        "dcgm-diag": {
            "template": slurm.replay("dcgm_diag_r3_h200_pass_dcgm3.json", sleep_s=120),
            "parser": "dcgm-diag-json",
        }
    }
    config = agent_config(slurm, tmp_path, commands)
    stack.agent("once", "--config", config, **slurm.env)
    stack.dispatch([device.id])
    before = len(slurm.steps())
    agent = stack.spawn_agent("run", "--config", config, FLEET_AGENT_JOBS_INTERVAL="0.2", **slurm.env)
    try:
        wait_for(lambda: slurm_jobs_on(slurm, "n2", before), "the dcgm-diag step to start on n2", agent=agent)
        slurm_job = slurm_jobs_on(slurm, "n2", before)[0]
        assert slurm.job_field(slurm_job, "JobState") == "RUNNING"
        job = Job.objects.get()

        response = stack.operator.post(f"/api/v1/jobs/{job.id}/cancel/", json={"reason": "operator cancelled"})
        assert response.status_code == 200, response.text

        wait_for(lambda: slurm.job_field(slurm_job, "JobState") == "CANCELLED", "scancel to reach Slurm", 30, agent)
    finally:
        agent.send_signal(signal.SIGTERM)
        agent.communicate(timeout=60)
    assert Job.objects.get().status == "cancelled"
    assert not TestExecution.objects.filter(status="running").exists()
    assert not JobDevice.objects.filter(active=True).exists()


def test_an_agent_killed_mid_step_reattaches_to_the_slurm_job_after_a_restart(
    slurm: Slurm, long_lease_stack: Stack, tmp_path: Path
) -> None:
    stack = long_lease_stack
    device = sat_a_devices()[2]
    commands = {
        "dcgm-diag": {
            "template": slurm.replay("dcgm_diag_r3_h200_fail_dcgm3.json", sleep_s=6),
            "parser": "dcgm-diag-json",
        }
    }
    config = agent_config(slurm, tmp_path, commands)
    stack.agent("once", "--config", config, **slurm.env)
    stack.dispatch([device.id])
    before = len(slurm.steps())
    agent = stack.spawn_agent("run", "--config", config, FLEET_AGENT_JOBS_INTERVAL="0.2", **slurm.env)
    try:
        wait_for(lambda: slurm_jobs_on(slurm, "n3", before), "the dcgm-diag step to start on n3", agent=agent)
    finally:
        os.kill(agent.pid, signal.SIGKILL)
        agent.wait(10)
    slurm_job = slurm_jobs_on(slurm, "n3", before)[0]
    remote = json.loads((stack.state_dir / "state.json").read_text())["remote"]
    assert [record["job_id"] for record in remote.values()] == [slurm_job]
    assert slurm.job_field(slurm_job, "JobState") == "RUNNING"  # the step outlives the agent

    restarted = stack.agent("once", "--config", config, **slurm.env)

    execution = TestExecution.objects.get(requirement__name="gpu-diag", device=device)
    assert execution.status == "completed", execution.error
    assert execution.metrics["diag_failed_tests"] == {"value": 1}  # the result of the step, not lost
    assert slurm.job_field(slurm_job, "JobState") == "COMPLETED"
    assert verdicts(device.hostname)["gpu-diag"] == "failed"
    assert "reattaching" in restarted.stderr
    assert json.loads((stack.state_dir / "state.json").read_text())["remote"] == {}
    assert not JobDevice.objects.filter(active=True).exists()
