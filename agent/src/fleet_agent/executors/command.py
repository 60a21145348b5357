"""Run real burn-in tools through configured command templates and parse what they print.

Each test maps to a `CommandSpec` (see `fleet_agent.executors.tooling`): a command template and the parser
for its output, e.g. `{"template": "ssh {hostname} dcgmi diag -r {level} -j", "parser": "dcgm-diag-json"}`,
optionally with its own `timeout` in seconds.

A tool that exits non-zero, runs past its timeout, cannot be started, or prints output its parser does not
recognise gives an `errored` outcome with a short error (the tail of its stderr); `run` never raises for
them. The tool runs in its own process group so that a timeout or a stop also ends its children (an `ssh`,
an `mpirun`), not just the process we started.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from fleet_agent.executors.base import WORKFLOWS, TestOutcome, TestRun, errored, utc_now
from fleet_agent.executors.tooling import (
    CommandSpec,
    PreparedCommand,
    command_line,
    exit_text,
    outcome_of_output,
    prepare_commands,
    with_tail,
)

__all__ = ["CommandExecutor", "CommandSpec"]

_POLL_S = 0.1
_TERMINATE_GRACE_S = 2.0


@dataclass(frozen=True)
class _Finished:
    returncode: int | None
    stdout: str
    stderr: str
    problem: str | None = None


class CommandExecutor:
    """An `Executor` that runs configured commands (see the module docstring)."""

    name = "command"

    def __init__(self, commands: Mapping[str, CommandSpec | Mapping[str, Any]], timeout_s: float = 7200) -> None:
        """Check every spec up front, so a typo in the configuration stops the agent at start, not mid-job."""
        if timeout_s <= 0:
            raise ValueError(f"timeout_s must be positive, got {timeout_s}")
        self.timeout_s = float(timeout_s)
        self._commands: dict[str, PreparedCommand] = prepare_commands(commands)

    def workflows(self) -> list[dict[str, str]]:
        """Both burn-in workflows: a template can launch a collective over `{hostnames}`."""
        return [dict(workflow) for workflow in WORKFLOWS]

    def run(self, run: TestRun, *, attempt: int, should_stop: Callable[[], bool] = lambda: False) -> TestOutcome:
        """Run the test's command once and parse its stdout into metrics."""
        started_at = utc_now()
        line = command_line(self._commands, run, attempt, started_at)
        if isinstance(line, TestOutcome):
            return line
        prepared, argv = line
        if should_stop():
            return errored("interrupted: the agent is stopping (not started)", started_at)
        finished = self._execute(argv, should_stop, prepared.timeout_s or self.timeout_s)
        finished_at = utc_now()
        if finished.problem is not None:
            return errored(with_tail(finished.problem, finished.stderr or finished.stdout), started_at, finished_at)
        if finished.returncode != 0:
            return errored(
                with_tail(exit_text(argv[0], finished.returncode), finished.stderr or finished.stdout),
                started_at,
                finished_at,
            )
        return outcome_of_output(prepared, argv[0], finished.stdout, run, started_at, finished_at)

    def _execute(self, argv: list[str], should_stop: Callable[[], bool], timeout_s: float) -> _Finished:
        program = argv[0]
        try:
            process = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                errors="replace",
                start_new_session=True,
            )
        except FileNotFoundError:
            return _Finished(None, "", "", f"command not found: {program}")
        except PermissionError:
            return _Finished(None, "", "", f"permission denied running {program}")
        except OSError as exc:
            return _Finished(None, "", "", f"could not start {program}: {exc.strerror or exc}")

        deadline = time.monotonic() + timeout_s
        while True:
            try:
                stdout, stderr = process.communicate(timeout=max(0.0, min(_POLL_S, deadline - time.monotonic())))
                return _Finished(process.returncode, stdout or "", stderr or "")
            except subprocess.TimeoutExpired:
                if should_stop():
                    stdout, stderr = _stop(process)
                    return _Finished(None, stdout, stderr, f"interrupted: the agent is stopping ({program} ended)")
                if time.monotonic() >= deadline:
                    stdout, stderr = _stop(process)
                    return _Finished(None, stdout, stderr, f"{program} timed out after {timeout_s:g} s")


def _stop(process: subprocess.Popen[str]) -> tuple[str, str]:
    """End the tool and everything it started: SIGTERM to its process group, SIGKILL if it lingers."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(process.pid, sig)
        try:
            stdout, stderr = process.communicate(timeout=_TERMINATE_GRACE_S)
            return stdout or "", stderr or ""
        except subprocess.TimeoutExpired:
            continue
    for stream in (process.stdout, process.stderr):
        if stream is not None:
            stream.close()
    process.wait()
    return "", ""
