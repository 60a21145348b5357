"""The Slurm executor against a real Slurm: submission, the nodes a step runs on, failure states, time
limits, cancellation and picking a job up again from its record."""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from fleet_agent.executors.base import Resumable, Target, TestRun
from fleet_agent.executors.hardware import collect_inventory
from fleet_agent.executors.slurm import SlurmExecutor, SlurmSettings, job_state
from tests.slurm.conftest import Slurm

DCGM_PASS = "dcgm_diag_r3_h200_pass_dcgm3.json"


class Ledger:
    """The agent's crash state as the executor sees it (an in-memory `RunLedger`)."""

    def __init__(self) -> None:
        self.records: dict[str, dict[str, Any]] = {}
        self.finished: list[str] = []

    def remote_started(self, execution_id: str, record: Mapping[str, Any]) -> None:
        self.records[execution_id] = dict(record)

    def remote_finished(self, execution_id: str) -> None:
        self.finished.append(execution_id)


def executor(
    slurm: Slurm,
    commands: dict[str, dict[str, Any]],
    tmp_path: Path,
    ledger: Ledger | None = None,
    hardware_commands: dict[str, Any] | None = None,
    **settings: Any,
) -> SlurmExecutor:
    options: dict[str, Any] = {
        "output_dir": str(tmp_path / "out"),
        "poll_interval": 0.2,
        "mpi": "none",
        "node_names": {f"host-{i}": f"n{i}" for i in range(1, 5)},
        "time_margin": 0,
    }
    options.update(settings)
    return SlurmExecutor(
        commands,
        SlurmSettings(**options),
        timeout_s=60,
        ledger=ledger,
        environ=_env(slurm),
        hardware_commands=hardware_commands,
    )


def _env(slurm: Slurm) -> dict[str, str]:
    import os

    return dict(os.environ) | slurm.env


def run_on(*hosts: str, test: str = "t", execution_id: str | None = None, **parameters: Any) -> TestRun:
    return TestRun(
        requirement="r",
        test=test,
        parameters=parameters,
        targets=tuple(Target(f"dev-{h}", h, "gpu.h200.8x") for h in hosts),
        execution_id=execution_id,
    )


def steps_of(slurm: Slurm, job_id: str) -> list[tuple[str, str, str]]:
    return [step for step in slurm.steps() if step[0].split(".")[0] == job_id]


def test_a_single_node_test_runs_as_one_step_on_the_mapped_node_and_is_parsed(slurm: Slurm, tmp_path: Path) -> None:
    ledger = Ledger()
    slurm_executor = executor(
        slurm, {"t": {"template": slurm.replay(DCGM_PASS), "parser": "dcgm-diag-json"}}, tmp_path, ledger
    )

    outcome = slurm_executor.run(run_on("host-2", execution_id="e1"), attempt=1)

    assert outcome.status == "completed", outcome.error
    assert outcome.metrics["diag_failed_tests"] == {"value": 0}
    job_id = ledger.records["e1"]["job_id"]
    assert [(node, rank) for _, node, rank in steps_of(slurm, job_id)] == [("n2", "0")]
    assert slurm.job_field(job_id, "JobState") == "COMPLETED"
    assert slurm.job_field(job_id, "TimeLimit") == "00:01:00"  # 60 s timeout, no margin: one minute
    assert ledger.finished == ["e1"]


def test_a_collective_runs_one_step_across_every_node_of_the_cohort(slurm: Slurm, tmp_path: Path) -> None:
    ledger = Ledger()
    commands = {"t": {"template": slurm.replay("nccl_2.13plus_h100_2node.txt"), "parser": "nccl-all-reduce"}}

    outcome = executor(slurm, commands, tmp_path, ledger).run(
        run_on("host-1", "host-2", "host-3", "host-4", execution_id="e2"), attempt=1
    )

    assert outcome.status == "completed", outcome.error
    assert outcome.metrics["busbw_gbps"]["value"] > 0
    steps = steps_of(slurm, ledger.records["e2"]["job_id"])
    assert len({step for step, _, _ in steps}) == 1
    assert sorted((node, rank) for _, node, rank in steps) == [("n1", "0"), ("n2", "1"), ("n3", "2"), ("n4", "3")]


def test_a_tool_that_fails_is_an_errored_run_naming_the_slurm_state(slurm: Slurm, tmp_path: Path) -> None:
    commands = {"t": {"template": slurm.replay(DCGM_PASS, status=3), "parser": "dcgm-diag-json"}}

    outcome = executor(slurm, commands, tmp_path).run(run_on("host-1"), attempt=1)

    assert outcome.status == "errored"
    assert outcome.error is not None and " ended FAILED (exit code 3:0" in outcome.error
    assert outcome.metrics == {}


def test_a_job_sbatch_refuses_is_errored_with_slurms_reason(slurm: Slurm, tmp_path: Path) -> None:
    commands = {"t": {"template": slurm.replay(DCGM_PASS), "parser": "dcgm-diag-json"}}

    outcome = executor(slurm, commands, tmp_path, reservation="no-such-reservation").run(run_on("host-1"), attempt=1)

    assert outcome.status == "errored"
    assert outcome.error is not None and outcome.error.startswith("sbatch refused the job")
    assert "reservation" in outcome.error.lower()


def test_stopping_cancels_the_slurm_job(slurm: Slurm, tmp_path: Path) -> None:
    ledger = Ledger()
    commands = {"t": {"template": slurm.replay(DCGM_PASS, sleep_s=120), "parser": "dcgm-diag-json"}}
    stop = threading.Event()
    slurm_executor = executor(slurm, commands, tmp_path, ledger)
    result: list[Any] = []
    worker = threading.Thread(
        target=lambda: result.append(
            slurm_executor.run(run_on("host-3", execution_id="e3"), attempt=1, should_stop=stop.is_set)
        )
    )
    worker.start()
    deadline = time.monotonic() + 30
    while not ("e3" in ledger.records and steps_of(slurm, ledger.records["e3"]["job_id"])):
        assert time.monotonic() < deadline, "the step never started"
        time.sleep(0.1)

    stop.set()
    worker.join(60)

    outcome = result[0]
    job_id = ledger.records["e3"]["job_id"]
    assert outcome.status == "errored"
    assert f"Slurm job {job_id} was cancelled" in outcome.error
    assert slurm.job_field(job_id, "JobState") == "CANCELLED"


def test_a_step_killed_by_the_slurm_time_limit_is_errored_with_timeout(slurm: Slurm, tmp_path: Path) -> None:
    # Slurm keeps limits in minutes and enforces them on a 30 s sweep: a 1 s timeout gives `--time=1`, and the
    # job is killed 60 to 90 s after it starts. The tool would sleep for 10 minutes.
    commands = {"t": {"template": slurm.replay(DCGM_PASS, sleep_s=600), "parser": "dcgm-diag-json", "timeout": 1}}
    ledger = Ledger()

    started = time.monotonic()
    outcome = executor(slurm, commands, tmp_path, ledger).run(run_on("host-4", execution_id="e4"), attempt=1)

    assert outcome.status == "errored"
    assert outcome.error is not None and " ended TIMEOUT " in outcome.error
    assert "reason TimeLimit" in outcome.error
    assert time.monotonic() - started < 150
    assert slurm.job_field(ledger.records["e4"]["job_id"], "JobState") == "TIMEOUT"


def test_a_recorded_job_is_picked_up_again_by_a_new_executor(slurm: Slurm, tmp_path: Path) -> None:
    """What a restarted agent does: a second executor (a new process) resumes from the record alone."""
    ledger = Ledger()
    commands = {"t": {"template": slurm.replay(DCGM_PASS, sleep_s=3), "parser": "dcgm-diag-json"}}
    first = executor(slurm, commands, tmp_path, ledger)
    stop = threading.Event()
    worker = threading.Thread(
        target=lambda: first.run(run_on("host-1", execution_id="e5"), attempt=1, should_stop=lambda: False)
    )
    worker.daemon = True
    worker.start()
    deadline = time.monotonic() + 30
    while "e5" not in ledger.records:
        assert time.monotonic() < deadline
        time.sleep(0.05)
    record = ledger.records["e5"]

    second = executor(slurm, commands, tmp_path)
    assert isinstance(second, Resumable)
    outcome = second.resume(record, should_stop=stop.is_set)

    assert outcome.status == "completed", outcome.error
    assert outcome.metrics["diag_gpu_count"] == {"value": 8}
    worker.join(30)


def test_cancel_of_a_recorded_job_that_already_ended_says_so(slurm: Slurm, tmp_path: Path) -> None:
    ledger = Ledger()
    commands = {"t": {"template": slurm.replay(DCGM_PASS), "parser": "dcgm-diag-json"}}
    slurm_executor = executor(slurm, commands, tmp_path, ledger)
    slurm_executor.run(run_on("host-2", execution_id="e6"), attempt=1)

    message = slurm_executor.cancel(ledger.records["e6"])

    assert message == f"Slurm job {ledger.records['e6']['job_id']} had already ended COMPLETED"


@pytest.mark.parametrize("state", ["NODE_FAIL", "OUT_OF_MEMORY", "PREEMPTED", "BOOT_FAIL", "CANCELLED"])
def test_every_slurm_failure_state_is_an_errored_run_with_the_state_in_its_reason(state: str, tmp_path: Path) -> None:
    line = f"JobId=7 JobName=fleet-t UserId=root(0) JobState={state} Reason=None Dependency=(null) ExitCode=0:9"
    current = job_state(line)
    assert current is not None and current.ended
    slurm_executor = SlurmExecutor(
        {"t": {"template": "true", "parser": "dcgm-diag-json"}}, SlurmSettings(output_dir=str(tmp_path))
    )
    prepared = slurm_executor._commands["t"]
    from fleet_agent.executors.base import utc_now

    outcome = slurm_executor._outcome("7", current, {"program": "true"}, prepared, run_on("h"), utc_now())

    assert outcome.status == "errored"
    assert outcome.error == f"Slurm job 7 ended {state} (exit code 0:9)"


def test_the_hardware_is_read_by_steps_on_the_device_s_node_and_its_health_window_is_judged(
    slurm: Slurm, tmp_path: Path
) -> None:
    """The inventory at a job's start and the `health-window` test, each reading a one-task Slurm step on the
    device's node (under the burn-in jobs' partition); a part with no command stays missing."""
    slurm_executor = executor(
        slurm,
        {"t": {"template": slurm.replay(DCGM_PASS), "parser": "dcgm-diag-json"}},
        tmp_path,
        hardware_commands={
            "nvidia_smi": slurm.replay("nvidia_smi_q_x_r535_a100_sxm4.xml"),
            "ibstat": slurm.replay("ibstat_h100_all_active.txt"),
            "kernel_log": slurm.replay("kernel_log_journalctl_short_iso_no_xid.log"),
        },
        partition="burnin",
    )
    before = len(slurm.steps())

    inventory = collect_inventory(slurm_executor.hardware, Target("dev-host-3", "host-3", "gpu.h200.8x"))
    outcome = slurm_executor.run(run_on("host-3", test="health-window"), attempt=1)

    assert inventory["driver_version"] == "535.54.03" and len(inventory["gpus"]) == 1 and inventory["hcas"]
    assert inventory["missing"] == ["dmi: no command configured (hardware_commands.dmi)"]
    assert outcome.status == "completed", outcome.error
    assert outcome.metrics["xid_fatal_count"]["value"] == 0 and outcome.metrics["gpu_count"]["value"] == 1
    assert outcome.health is not None and outcome.health["source"] == "journalctl"
    # ibstat and nvidia-smi for the inventory, then nvidia-smi twice (before, after) and the kernel log
    steps = slurm.steps()[before:]
    assert [(on, rank) for _, on, rank in steps] == [("n3", "0")] * 5
    assert len({step.split(".")[0] for step, _, _ in steps}) == 5  # each its own Slurm job
    assert {slurm.job_field(step.split(".")[0], "Partition") for step, _, _ in steps} == {"burnin"}
