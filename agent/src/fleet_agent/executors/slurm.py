"""Run burn-in tests as Slurm jobs on exactly the fleet job's nodes, with Slurm's own command-line tools.

Each test run becomes one batch job (`sbatch --parsable`) whose script runs the test as one Slurm step:
`srun --nodes=1 --nodelist=HOST …` for a single-node test, `srun --nodes=N --nodelist=H1,…,HN --mpi=pmix …`
for a multi-node collective (or, with `launcher: none`, the command itself inside the allocation, for an
`mpirun` template that reads `$SLURM_JOB_NODELIST`). The job asks for the configured partition, account,
reservation and QoS, and for `--time` derived from the test's timeout (`commands.<test>.timeout`, else
`command_timeout`, plus `slurm_time_margin`, rounded up to whole minutes: Slurm keeps time limits in minutes).

Why a batch job around the step rather than a bare `srun`: `sbatch --parsable` hands back the job id at
once, before anything runs, so the agent records it in its crash state; the job and its output file
outlive the agent, so a restarted agent can reattach to it (or cancel it) instead of losing the run; and
`scancel <id>` reaches every node of the step. Why the command-line tools rather than pyslurm: pyslurm must
be built against the exact Slurm release of the site (it has no wheels), while `sbatch`, `scontrol`,
`sacct` and `scancel` keep their interface across releases and are what every site already runs.

States are read with `scontrol show job -o` (accounting need not be on), falling back to `sacct` once
`scontrol` has forgotten the job. `COMPLETED` with exit code 0 is parsed with the test's parser (the same
parsers, through the same code, as the `command` executor); any other end (`FAILED`, `TIMEOUT`,
`NODE_FAIL`, `OUT_OF_MEMORY`, `CANCELLED`, `PREEMPTED`, `BOOT_FAIL`, `DEADLINE`, …) is an `errored`
execution whose error names the state, never a pass. A stop (the fleet job was cancelled, its lease was
lost, the agent is shutting down) `scancel`s the Slurm job.

The device's hardware (the inventory at the start of a single-device job, and the `health-window` test) is read
with the same `hardware_commands` as the `command` executor, naming the tool itself (no `ssh`): each runs as a
one-task Slurm step on the device's node (`srun --nodes=1 --ntasks=1 --nodelist=NODE --time=…` with the
partition, account, reservation and QoS of the burn-in jobs), between the job's tests, when the node is the
fleet job's. The inventory sweep reads nothing here: an in-service node runs production jobs, and a step
queued behind them would hold the sweep; its fingerprint is read again at its next burn-in.

The job's stdout and stderr go to `slurm_output_dir`, which the agent must be able to read: a folder
shared between the agent host and the compute nodes (Slurm writes the files on the job's first node).
"""

from __future__ import annotations

import math
import os
import shlex
import subprocess
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from fleet_agent.executors.base import (
    WORKFLOWS,
    RemedyResult,
    RemedyRun,
    RunLedger,
    Target,
    TestOutcome,
    TestRun,
    errored,
    read_output_file,
    utc_now,
)
from fleet_agent.executors.command import CommandHardware
from fleet_agent.executors.hardware import HEALTH_WINDOW_TEST, health_window
from fleet_agent.executors.remedies import SlurmRemedies
from fleet_agent.executors.tooling import (
    CommandSpec,
    PreparedCommand,
    command_line,
    outcome_of_output,
    prepare_commands,
    with_tail,
)
from fleet_rules.node_gate import slurm_node_name_problem

__all__ = ["FAILURE_STATES", "SlurmExecutor", "SlurmSettings", "job_state", "slurm_binary", "slurm_tool"]

#: Job states after which a job never runs again (squeue/scontrol spell them in capitals).
FAILURE_STATES = frozenset(
    {
        "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY", "PREEMPTED", "BOOT_FAIL", "DEADLINE",
        "REVOKED", "SPECIAL_EXIT",
    }
)  # fmt: skip
_ENDED = FAILURE_STATES | {"COMPLETED"}
_COMMAND_KEYS = frozenset({"ntasks_per_node", "srun_args", "launcher"})
_LAUNCHERS = ("srun", "none")
_TOOL_TIMEOUT_S = 60.0
_CANCEL_WAIT_S = 30.0
_UNREACHABLE_GRACE_S = 300.0


@dataclass(frozen=True)
class SlurmSettings:
    """The `slurm_*` configuration keys (see docs/agent.md)."""

    partition: str = ""
    account: str = ""
    reservation: str = ""
    qos: str = ""
    mpi: str = "pmix"
    exclusive: bool = True
    node_names: Mapping[str, str] = field(default_factory=dict)
    node_name: str = "{hostname}"
    output_dir: str = ".fleet-agent/slurm"
    poll_interval: float = 2.0
    pending_timeout: float = 3600.0
    time_margin: float = 300.0
    bin_dir: str = ""
    on_restart: str = "reattach"
    sbatch_args: str = ""

    def check(self) -> SlurmSettings:
        if self.on_restart not in ("reattach", "cancel"):
            raise ValueError(f"slurm_on_restart: {self.on_restart!r} is not one of reattach, cancel")
        if self.poll_interval <= 0:
            raise ValueError("slurm_poll_interval: must be positive")
        if self.pending_timeout <= 0:
            raise ValueError("slurm_pending_timeout: must be positive")
        if self.time_margin < 0:
            raise ValueError("slurm_time_margin: must not be negative")
        if not isinstance(self.node_names, Mapping) or not all(
            isinstance(k, str) and isinstance(v, str) and v for k, v in self.node_names.items()
        ):
            raise ValueError("slurm_node_names: must map fleet hostnames to Slurm node names (strings)")
        for hostname, node in self.node_names.items():
            problem = slurm_node_name_problem(node)
            if problem:
                raise ValueError(f"slurm_node_names: {hostname}: {problem}")
        try:
            example = self.node_name.format(hostname="h")
        except (KeyError, IndexError, ValueError) as exc:
            raise ValueError(f"slurm_node_name: {self.node_name!r} may only use {{hostname}}: {exc}") from exc
        if slurm_node_name_problem(example):
            raise ValueError(f"slurm_node_name: {self.node_name!r} makes {slurm_node_name_problem(example)}")
        try:
            shlex.split(self.sbatch_args)
        except ValueError as exc:
            raise ValueError(f"slurm_sbatch_args: cannot be split: {exc}") from exc
        return self

    def slurm_node(self, hostname: str) -> str:
        """The Slurm node name of a fleet device (`slurm_node_names`, else the `slurm_node_name` template),
        held to Slurm's grammar (`fleet_rules.node_gate.slurm_node_name_problem`): `NotANodeName` otherwise,
        so that no hostname the service sends is ever written raw into a script or an `scontrol` line."""
        node = self.mapped_node(hostname)
        problem = slurm_node_name_problem(node)
        if problem:
            raise NotANodeName(f"device {hostname!r}: {problem}")
        return node

    def mapped_node(self, hostname: str) -> str:
        """The name the mapping gives, unchecked: for the node gate's plan, which skips a bad one by the same rule."""
        return self.node_names.get(hostname) or self.node_name.format(hostname=hostname)


class NotANodeName(ValueError):
    """A device's Slurm node name is outside Slurm's grammar: its run errors, the gate leaves it alone."""


@dataclass(frozen=True)
class JobState:
    """What Slurm says about a job: its state, the scheduler's reason and `ExitCode` (`code:signal`)."""

    state: str
    reason: str = ""
    exit_code: str = ""

    @property
    def ended(self) -> bool:
        return self.state in _ENDED


class SlurmExecutor:
    """An `Executor` (and `Resumable`) that runs each test as a Slurm job (see the module docstring)."""

    name = "slurm"
    #: The inventory sweep reads no hardware through Slurm (see the module docstring).
    sweeps_hardware = False

    def __init__(
        self,
        commands: Mapping[str, CommandSpec | Mapping[str, Any]],
        settings: SlurmSettings,
        *,
        timeout_s: float = 7200,
        ledger: RunLedger | None = None,
        environ: Mapping[str, str] | None = None,
        hardware_commands: Mapping[str, Any] | None = None,
        remedy_commands: Mapping[str, Any] | None = None,
    ) -> None:
        if timeout_s <= 0:
            raise ValueError(f"command_timeout: must be positive, got {timeout_s}")
        self.settings = settings.check()
        self.timeout_s = float(timeout_s)
        self._commands = prepare_commands(commands, extra_keys=_COMMAND_KEYS)
        for test, prepared in self._commands.items():
            _check_slurm_keys(test, prepared)
        self._ledger = ledger
        self._environ = dict(os.environ if environ is None else environ)
        self._output_dir = Path(settings.output_dir)
        self.hardware = CommandHardware(hardware_commands or {}, launcher=self._hardware_step, env=self._environ)
        self.remedies = SlurmRemedies(self, remedy_commands)

    def remedy(self, run: RemedyRun, *, should_stop: Callable[[], bool] = lambda: False) -> RemedyResult:
        """A step of the remediation ladder: a GPU reset as a Slurm step on the node (`remedy_commands.reset_gpu`),
        a reboot with `scontrol reboot ASAP` under the node gate's ownership rules (fleet_agent.executors.remedies)."""
        return self.remedies.remedy(run, should_stop=should_stop)

    def workflows(self) -> list[dict[str, str]]:
        """Both burn-in workflows: a multi-node test is one step across the cohort's nodes."""
        return [dict(workflow) for workflow in WORKFLOWS]

    # --- running ----------------------------------------------------------------------------------

    def run(self, run: TestRun, *, attempt: int, should_stop: Callable[[], bool] = lambda: False) -> TestOutcome:
        """Submit the test as a Slurm job, wait for it to end, and parse its output (the `health-window` test,
        unless `commands` names a tool for it: the hardware readings of the window, each a Slurm step)."""
        if run.test == HEALTH_WINDOW_TEST and run.test not in self._commands:
            return health_window(self.hardware, run)
        started_at = utc_now()
        line = command_line(self._commands, run, attempt, started_at)
        if isinstance(line, TestOutcome):
            return line
        prepared, argv = line
        if should_stop():
            return errored("interrupted: the agent is stopping (not submitted)", started_at)

        try:
            nodes = [self.settings.slurm_node(target.hostname) for target in run.targets]
        except NotANodeName as exc:
            return errored(str(exc), started_at)
        tag = f"{run.execution_id or uuid.uuid4()}-a{attempt}"
        try:
            self._output_dir.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            return errored(f"slurm_output_dir {self._output_dir}: cannot be created: {exc.strerror}", started_at)
        script = self._output_dir / f"{tag}.sh"
        stdout, stderr = self._output_dir / f"{tag}.out", self._output_dir / f"{tag}.err"
        for stale in (stdout, stderr):
            stale.unlink(missing_ok=True)
        script.write_text(self._script(run, prepared, argv, nodes, attempt))
        script.chmod(0o750)
        minutes = self._time_limit_minutes(prepared)
        submitted = self._tool(self._sbatch_argv(run, nodes, minutes, script, stdout, stderr))
        if submitted.returncode != 0:
            return errored(with_tail("sbatch refused the job", submitted.stderr or submitted.stdout), started_at)
        job_id = submitted.stdout.strip().split(";")[0]
        if not job_id.isdigit():
            return errored(f"sbatch answered {submitted.stdout.strip()!r} instead of a job id", started_at)
        record = {
            "executor": self.name,
            "job_id": job_id,
            "test": run.test,
            "program": argv[0],
            "parameters": dict(run.parameters),
            "stdout": str(stdout),
            "stderr": str(stderr),
            "started_at": started_at.isoformat(),
            "nodes": nodes,
        }
        if self._ledger is not None and run.execution_id is not None:
            self._ledger.remote_started(run.execution_id, record)
        outcome = self._follow(record, prepared, run, started_at, should_stop)
        if self._ledger is not None and run.execution_id is not None:
            self._ledger.remote_finished(run.execution_id)
        return outcome

    def resume(self, record: Mapping[str, Any], *, should_stop: Callable[[], bool] = lambda: False) -> TestOutcome:
        """Pick up a job recorded before an agent restart: wait for it and report how it ended."""
        started_at = _parse_time(record.get("started_at")) or utc_now()
        test = str(record.get("test", ""))
        prepared = self._commands.get(test)
        if prepared is None:
            self.cancel(record)
            return errored(
                f"Slurm job {record.get('job_id')}: no command is configured for test {test} any more", started_at
            )
        run = TestRun(requirement="", test=test, parameters=dict(record.get("parameters") or {}), targets=())
        return self._follow(record, prepared, run, started_at, should_stop)

    def cancel(self, record: Mapping[str, Any]) -> str:
        """`scancel` a recorded job unless it already ended; returns what happened, for the execution's error."""
        job_id = str(record.get("job_id", ""))
        current = self._state(job_id)
        if current is not None and current.ended:
            return f"Slurm job {job_id} had already ended {current.state}"
        self._scancel(job_id)
        return f"Slurm job {job_id} was cancelled"

    # --- internals --------------------------------------------------------------------------------

    def _follow(
        self,
        record: Mapping[str, Any],
        prepared: PreparedCommand,
        run: TestRun,
        started_at: datetime,
        should_stop: Callable[[], bool],
    ) -> TestOutcome:
        job_id = str(record["job_id"])
        pending_since = time.monotonic()
        unreachable_since: float | None = None
        while True:
            if should_stop():
                self._scancel(job_id)
                ended = self._wait_ended(job_id, _CANCEL_WAIT_S)
                state = ended.state if ended is not None else "unknown"
                return errored(
                    f"interrupted: the agent is stopping or the fleet job ended; Slurm job {job_id} was cancelled "
                    f"(state {state})",
                    started_at,
                )
            current = self._state(job_id)
            now = time.monotonic()
            if current is None:
                unreachable_since = unreachable_since or now
                if now - unreachable_since > max(_UNREACHABLE_GRACE_S, 5 * self.settings.poll_interval):
                    return errored(f"Slurm no longer answers for job {job_id} (scontrol and sacct)", started_at)
            else:
                unreachable_since = None
                if current.ended:
                    return self._outcome(job_id, current, record, prepared, run, started_at)
                if current.state != "PENDING":
                    pending_since = now
                elif now - pending_since > self.settings.pending_timeout:
                    self._scancel(job_id)
                    return errored(
                        f"Slurm job {job_id} was still PENDING after {self.settings.pending_timeout:g} s "
                        f"(reason {current.reason or 'none given'}); it was cancelled",
                        started_at,
                    )
            time.sleep(self.settings.poll_interval)

    def _outcome(
        self,
        job_id: str,
        current: JobState,
        record: Mapping[str, Any],
        prepared: PreparedCommand,
        run: TestRun,
        started_at: datetime,
    ) -> TestOutcome:
        finished_at = utc_now()
        stdout, too_large = read_output_file(record.get("stdout"))
        stderr, _ = read_output_file(record.get("stderr"))
        if too_large is not None:
            return errored(f"Slurm job {job_id}: {too_large}", started_at, finished_at)
        if current.state == "COMPLETED" and current.exit_code in ("", "0:0"):
            return outcome_of_output(
                prepared, str(record.get("program", run.test)), stdout, run, started_at, finished_at
            )
        detail = f"exit code {current.exit_code}" if current.exit_code else "no exit code"
        if current.reason and current.reason != "None":
            detail += f", reason {current.reason}"
        return errored(
            with_tail(f"Slurm job {job_id} ended {current.state} ({detail})", stderr or stdout), started_at, finished_at
        )

    def _script(self, run: TestRun, prepared: PreparedCommand, argv: list[str], nodes: list[str], attempt: int) -> str:
        command = shlex.join(argv)
        if prepared.extra.get("launcher", "srun") == "srun":
            step = [
                "srun",
                f"--nodes={len(nodes)}",
                f"--ntasks-per-node={int(prepared.extra.get('ntasks_per_node', 1))}",
                f"--nodelist={','.join(nodes)}",
                "--kill-on-bad-exit=1",
            ]
            if len(nodes) > 1 and self.settings.mpi not in ("", "none"):
                step.append(f"--mpi={self.settings.mpi}")
            step.extend(_split(prepared.extra.get("srun_args", ())))
            command = f"{shlex.join(self._binary(step[0:1]) + step[1:])} {command}"
        return (
            "#!/bin/sh\n"
            f"# fleet-burnin: requirement {run.requirement!r}, test {run.test!r}, attempt {attempt}, "
            f"nodes {','.join(nodes)}\n"
            f"exec {command}\n"
        )

    def _hardware_step(self, target: Target, timeout_s: float) -> list[str]:
        """What runs a hardware reading on the target's node: a one-task step in a job of its own, under the
        burn-in jobs' partition, account, reservation and QoS, within the reading's timeout."""
        argv = [
            "srun",
            "--nodes=1",
            "--ntasks=1",
            f"--nodelist={self.settings.slurm_node(target.hostname)}",
            f"--time={max(1, math.ceil(timeout_s / 60))}",
            "--job-name=fleet-hardware",
            "--quiet",
            *self._placement(),
        ]
        return self._binary(argv)

    def _placement(self) -> list[str]:
        """Where burn-in runs: the configured partition, account, reservation and QoS."""
        return [
            f"--{option}={value}"
            for option, value in (
                ("partition", self.settings.partition),
                ("account", self.settings.account),
                ("reservation", self.settings.reservation),
                ("qos", self.settings.qos),
            )
            if value
        ]

    def _sbatch_argv(
        self, run: TestRun, nodes: list[str], minutes: int, script: Path, stdout: Path, stderr: Path
    ) -> list[str]:
        argv = [
            "sbatch",
            "--parsable",
            f"--job-name=fleet-{run.test}",
            f"--nodes={len(nodes)}",
            f"--nodelist={','.join(nodes)}",
            f"--time={minutes}",
            f"--output={stdout}",
            f"--error={stderr}",
            "--no-requeue",
        ]
        if self.settings.exclusive:
            argv.append("--exclusive")
        argv.extend(self._placement())
        argv.extend(shlex.split(self.settings.sbatch_args))
        argv.append(str(script))
        return argv

    def _time_limit_minutes(self, prepared: PreparedCommand) -> int:
        seconds = (prepared.timeout_s or self.timeout_s) + self.settings.time_margin
        return max(1, math.ceil(seconds / 60))

    def _state(self, job_id: str) -> JobState | None:
        """The job's state from scontrol, else sacct; None when neither answers."""
        shown = self._tool(["scontrol", "show", "job", "-o", job_id])
        if shown.returncode == 0:
            state = job_state(shown.stdout)
            if state is not None:
                return state
        accounted = self._tool(["sacct", "-n", "-P", "-X", "-j", job_id, "-o", "State,ExitCode,Reason"])
        if accounted.returncode == 0:
            for line in accounted.stdout.splitlines():
                parts = line.split("|")
                if len(parts) >= 2 and parts[0].strip():
                    return JobState(parts[0].split()[0].upper(), parts[2] if len(parts) > 2 else "", parts[1])
        return None

    def _wait_ended(self, job_id: str, wait_s: float) -> JobState | None:
        deadline = time.monotonic() + wait_s
        current = self._state(job_id)
        while time.monotonic() < deadline and (current is None or not current.ended):
            time.sleep(min(self.settings.poll_interval, 0.5))
            current = self._state(job_id)
        return current

    def _scancel(self, job_id: str) -> None:
        self._tool(["scancel", job_id])

    def _binary(self, argv: Sequence[str]) -> list[str]:
        return slurm_binary(argv, self.settings.bin_dir)

    def _tool(self, argv: list[str]) -> subprocess.CompletedProcess[str]:
        return slurm_tool(argv, bin_dir=self.settings.bin_dir, env=self._environ, timeout_s=_TOOL_TIMEOUT_S)


def slurm_binary(argv: Sequence[str], bin_dir: str) -> list[str]:
    """`argv` with its program taken from `slurm_bin_dir` when one is set (else from PATH)."""
    if not bin_dir:
        return list(argv)
    return [str(Path(bin_dir) / argv[0]), *argv[1:]]


def slurm_tool(
    argv: list[str], *, bin_dir: str, env: Mapping[str, str], timeout_s: float
) -> subprocess.CompletedProcess[str]:
    """Run one of Slurm's commands (`sbatch`, `scontrol`, …) to its end; never raises: a tool that cannot be
    started or does not answer within `timeout_s` is a non-zero exit whose stderr says why."""
    full = slurm_binary(argv, bin_dir)
    try:
        return subprocess.run(
            full,
            env=dict(env),
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            errors="replace",
            timeout=timeout_s,
            check=False,
        )
    except FileNotFoundError:
        return subprocess.CompletedProcess(full, 127, "", f"{full[0]}: command not found (slurm_bin_dir?)")
    except subprocess.TimeoutExpired:
        return subprocess.CompletedProcess(full, 124, "", f"{full[0]}: no answer within {timeout_s:g} s")
    except OSError as exc:
        return subprocess.CompletedProcess(full, 126, "", f"{full[0]}: {exc}")


def job_state(scontrol_line: str) -> JobState | None:
    """The state in one `scontrol show job -o` line (`JobState=COMPLETED Reason=None … ExitCode=0:0`)."""
    fields: dict[str, str] = {}
    for token in scontrol_line.split():
        key, sep, value = token.partition("=")
        if sep and key not in fields:
            fields[key] = value
    state = fields.get("JobState")
    if not state:
        return None
    return JobState(state.upper(), fields.get("Reason", ""), fields.get("ExitCode", ""))


def _check_slurm_keys(test: str, prepared: PreparedCommand) -> None:
    where = f"commands.{test}"
    launcher = prepared.extra.get("launcher", "srun")
    if launcher not in _LAUNCHERS:
        raise ValueError(f"{where}.launcher: {launcher!r} is not one of {', '.join(_LAUNCHERS)}")
    tasks = prepared.extra.get("ntasks_per_node", 1)
    if isinstance(tasks, bool) or not isinstance(tasks, int) or tasks < 1:
        raise ValueError(f"{where}.ntasks_per_node: must be a positive integer, got {tasks!r}")
    try:
        _split(prepared.extra.get("srun_args", ()))
    except ValueError as exc:
        raise ValueError(f"{where}.srun_args: {exc}") from exc


def _split(value: Any) -> list[str]:
    if isinstance(value, str):
        return shlex.split(value)
    if isinstance(value, list | tuple) and all(isinstance(item, str) for item in value):
        return list(value)
    raise ValueError(f"must be a string or a list of strings, got {value!r}")


def _parse_time(raw: Any) -> datetime | None:
    try:
        return datetime.fromisoformat(str(raw))
    except ValueError:
        return None
