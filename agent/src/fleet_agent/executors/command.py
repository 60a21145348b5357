"""Run real burn-in tools through configured command templates and parse what they print.

Each test maps to a `CommandSpec`: a command template and the parser for its output, e.g.
`{"template": "ssh {hostname} dcgmi diag -r {level} -j", "parser": "dcgm-diag-json"}`. The template is
split into arguments first and each argument is formatted afterwards, and no shell is involved: a job
parameter or hostname therefore always stays one argument and can never smuggle in another command
(a list parameter that fills a whole argument, such as `-t {testcases}`, becomes one argument per item).

Placeholders: `hostname`, `device_id` (the first target: the device, or the launcher of a cohort),
`hostnames` and `device_ids` (the cohort, comma-joined), `topology_label`, `resource_class`, `test`,
`requirement`, `attempt`, and every job parameter (target identity wins over a parameter of the same name).
Literal braces in a template are written doubled, as in `str.format`.

A tool that exits non-zero, runs past `timeout_s`, cannot be started, or prints output its parser does not
recognise gives an `errored` outcome with a short error (the tail of its stderr); `run` never raises for
them. The tool runs in its own process group so that a timeout or a stop also ends its children (an `ssh`,
an `mpirun`), not just the process we started.
"""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import signal
import subprocess
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, TypedDict

from fleet_agent.executors.base import COMPLETED, WORKFLOWS, TestOutcome, TestRun, errored, utc_now
from fleet_agent.parsers import Metrics, ParseError, parser_for

__all__ = ["CommandExecutor", "CommandSpec"]

_POLL_S = 0.1
_TERMINATE_GRACE_S = 2.0
_TAIL_LINES = 10
_TAIL_CHARS = 1000


class CommandSpec(TypedDict):
    """How to run one test: an argument template and the name of the parser for its stdout."""

    template: str
    parser: str


@dataclass(frozen=True)
class _Prepared:
    tokens: tuple[str, ...]
    parser_name: str
    parse: Callable[[str], Metrics]


@dataclass(frozen=True)
class _Finished:
    returncode: int | None
    stdout: str
    stderr: str
    problem: str | None = None


class CommandExecutor:
    """An `Executor` that runs configured commands (see the module docstring)."""

    name = "command"

    def __init__(self, commands: Mapping[str, CommandSpec], timeout_s: float = 7200) -> None:
        """Check every spec up front, so a typo in the configuration stops the agent at start, not mid-job."""
        if timeout_s <= 0:
            raise ValueError(f"timeout_s must be positive, got {timeout_s}")
        self.timeout_s = float(timeout_s)
        self._commands: dict[str, _Prepared] = {}
        for test, spec in commands.items():
            template, parser_name = spec.get("template"), spec.get("parser")
            if not isinstance(template, str) or not template.strip():
                raise ValueError(f"command for test {test!r} needs a non-empty template")
            if not isinstance(parser_name, str):
                raise ValueError(f"command for test {test!r} needs a parser name")
            try:
                tokens = tuple(shlex.split(template))
            except ValueError as exc:
                raise ValueError(f"command template for test {test!r} cannot be split: {exc}") from exc
            self._commands[test] = _Prepared(tokens, parser_name, parser_for(parser_name))

    def workflows(self) -> list[dict[str, str]]:
        """Both burn-in workflows: a template can launch a collective over `{hostnames}`."""
        return [dict(workflow) for workflow in WORKFLOWS]

    def run(self, run: TestRun, *, attempt: int, should_stop: Callable[[], bool] = lambda: False) -> TestOutcome:
        """Run the test's command once and parse its stdout into metrics."""
        started_at = utc_now()
        prepared = self._commands.get(run.test)
        if prepared is None:
            return errored(f"no command is configured for test {run.test}", started_at)
        if not run.targets:
            return errored(f"test {run.test} was given no targets", started_at)
        try:
            argv = _argv(prepared.tokens, _context(run, attempt))
        except KeyError as exc:
            return errored(f"command template for test {run.test} uses unknown placeholder {exc}", started_at)
        except (ValueError, IndexError, AttributeError) as exc:
            return errored(f"command template for test {run.test} cannot be filled in: {exc}", started_at)
        if not argv:
            return errored(f"command template for test {run.test} is empty once filled in", started_at)

        if should_stop():
            return errored("interrupted: the agent is stopping (not started)", started_at)
        finished = self._execute(argv, should_stop)
        finished_at = utc_now()
        program = os.path.basename(argv[0])
        if finished.problem is not None:
            return errored(_with_tail(finished.problem, finished.stderr or finished.stdout), started_at, finished_at)
        if finished.returncode != 0:
            return errored(
                _with_tail(_exit_text(program, finished.returncode), finished.stderr or finished.stdout),
                started_at,
                finished_at,
            )
        try:
            metrics = prepared.parse(finished.stdout)
        except ParseError as exc:
            return errored(
                f"could not read the output of {program} as {prepared.parser_name}: {exc}", started_at, finished_at
            )
        return TestOutcome(
            status=COMPLETED, metrics=metrics, error=None, started_at=started_at, finished_at=finished_at
        )

    def _execute(self, argv: list[str], should_stop: Callable[[], bool]) -> _Finished:
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

        deadline = time.monotonic() + self.timeout_s
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
                    return _Finished(None, stdout, stderr, f"{program} timed out after {self.timeout_s:g} s")


def _context(run: TestRun, attempt: int) -> dict[str, Any]:
    first = run.targets[0]
    context: dict[str, Any] = dict(run.parameters)
    context.update(
        hostname=first.hostname,
        hostnames=",".join(target.hostname for target in run.targets),
        device_id=first.device_id,
        device_ids=",".join(target.device_id for target in run.targets),
        topology_label=run.topology_label or "",
        resource_class=first.resource_class,
        test=run.test,
        requirement=run.requirement,
        attempt=attempt,
    )
    return context


def _argv(tokens: tuple[str, ...], context: Mapping[str, Any]) -> list[str]:
    rendered = {key: _rendered(value) for key, value in context.items()}
    argv: list[str] = []
    for token in tokens:
        whole = token[1:-1] if token.startswith("{") and token.endswith("}") and token.count("{") == 1 else None
        if whole is not None and isinstance(context.get(whole), list | tuple):
            argv.extend(_scalar(item) for item in context[whole])
        else:
            argv.append(token.format_map(rendered))
    return argv


def _rendered(value: Any) -> Any:
    """Values as a command line wants them: lists comma-joined, booleans lowercase, null empty."""
    if isinstance(value, list | tuple):
        return ",".join(_scalar(item) for item in value)
    if isinstance(value, dict):
        return json.dumps(value, sort_keys=True, separators=(",", ":"))
    if isinstance(value, bool) or value is None:
        return _scalar(value)
    return value


def _scalar(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return ""
    if isinstance(value, dict | list | tuple):
        return json.dumps(value, sort_keys=True, separators=(",", ":"))
    return str(value)


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


def _exit_text(program: str, returncode: int | None) -> str:
    if returncode is not None and returncode < 0:
        try:
            name = signal.Signals(-returncode).name
        except ValueError:
            name = f"signal {-returncode}"
        return f"{program} was killed by {name}"
    return f"{program} exited with status {returncode}"


def _with_tail(message: str, output: str) -> str:
    lines = [line.rstrip() for line in output.strip().splitlines() if line.strip()]
    tail = "\n".join(lines[-_TAIL_LINES:])
    if len(tail) > _TAIL_CHARS:
        tail = "…" + tail[-(_TAIL_CHARS - 1) :]
    return f"{message}: {tail}" if tail else message
