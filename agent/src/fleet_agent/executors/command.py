"""Run real burn-in tools through configured command templates and parse what they print.

Each test maps to a `CommandSpec` (see `fleet_agent.executors.tooling`): a command template and the parser
for its output, e.g. `{"template": "ssh {hostname} dcgmi diag -r {level} -j", "parser": "dcgm-diag-json"}`,
optionally with its own `timeout` in seconds.

A tool that exits non-zero, runs past its timeout, cannot be started, or prints output its parser does not
recognise gives an `errored` outcome with a short error (the tail of its stderr); `run` never raises for
them.

`hardware_commands` name how to read the device's hardware (`CommandHardware`): its inventory around every job
and the `health-window` test, which runs no `commands` entry of its own.

The tool runs in its own process group so that a timeout or a stop also ends its children (an `ssh`,
an `mpirun`), not just the process we started.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import IO, Any

from fleet_agent.executors.base import (
    MAX_OUTPUT_BYTES,
    WORKFLOWS,
    RemedyResult,
    RemedyRun,
    Target,
    TestOutcome,
    TestRun,
    errored,
    output_too_large,
    utc_now,
)
from fleet_agent.executors.hardware import HEALTH_WINDOW_TEST, NOT_CONFIGURED, Phase, Reading, health_window
from fleet_agent.executors.remedies import CommandRemedies
from fleet_agent.executors.tooling import (
    CommandSpec,
    PreparedCommand,
    command_line,
    exit_text,
    fill_arguments,
    outcome_of_output,
    prepare_commands,
    with_tail,
)
from fleet_agent.gpus import GPU_VENDORS

__all__ = ["HARDWARE_COMMAND_KEYS", "CommandExecutor", "CommandHardware", "CommandSpec"]

#: The `hardware_commands` keys: one command per part, and the kernel log's fallback. The GPU parts take a
#: command per vendor (`gpu_inventory: {nvidia: …, amd: …}`) or one for every vendor; `nvidia_smi` is the older
#: spelling of both GPU parts for NVIDIA (`nvidia-smi -q -x` answers for both).
GPU_PARTS: tuple[str, ...] = ("gpu_inventory", "gpu_health")
HARDWARE_COMMAND_KEYS: tuple[str, ...] = (
    *GPU_PARTS,
    "ibstat",
    "ib_counters",
    "dmi",
    "kernel_log",
    "kernel_log_fallback",
    "nvidia_smi",
)
_HARDWARE_TIMEOUT_S = 120.0

_POLL_S = 0.1
_READ_CHUNK = 1024 * 1024
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

    def __init__(
        self,
        commands: Mapping[str, CommandSpec | Mapping[str, Any]],
        timeout_s: float = 7200,
        hardware_commands: Mapping[str, Any] | None = None,
        remedy_commands: Mapping[str, Any] | None = None,
    ) -> None:
        """Check every spec up front, so a typo in the configuration stops the agent at start, not mid-job."""
        if timeout_s <= 0:
            raise ValueError(f"timeout_s must be positive, got {timeout_s}")
        self.timeout_s = float(timeout_s)
        self._commands: dict[str, PreparedCommand] = prepare_commands(commands)
        self.hardware = CommandHardware(hardware_commands or {})
        self.remedies = CommandRemedies(
            remedy_commands, lambda argv, stop, timeout, _target: _execute(argv, stop, timeout)
        )

    def remedy(self, run: RemedyRun, *, should_stop: Callable[[], bool] = lambda: False) -> RemedyResult:
        """A step of the remediation ladder with `remedy_commands` (fleet_agent.executors.remedies)."""
        return self.remedies.remedy(run, should_stop=should_stop)

    def workflows(self) -> list[dict[str, str]]:
        """Both burn-in workflows: a template can launch a collective over `{hostnames}`."""
        return [dict(workflow) for workflow in WORKFLOWS]

    def run(self, run: TestRun, *, attempt: int, should_stop: Callable[[], bool] = lambda: False) -> TestOutcome:
        """Run the test's command once and parse its stdout into metrics."""
        if run.test == HEALTH_WINDOW_TEST and run.test not in self._commands:
            return health_window(self.hardware, run)
        started_at = utc_now()
        line = command_line(self._commands, run, attempt, started_at)
        if isinstance(line, TestOutcome):
            return line
        prepared, argv = line
        if should_stop():
            return errored("interrupted: the agent is stopping (not started)", started_at)
        finished = _execute(argv, should_stop, prepared.timeout_s or self.timeout_s)
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


class CommandHardware:
    """A `HardwareSource` that runs `hardware_commands` (argument templates, no shell) and hands back what they
    print. Placeholders: `hostname`, `device_id`, `resource_class`, and for the kernel log `since`/`until` (ISO
    8601, UTC) and `since_epoch`/`until_epoch` (whole seconds, for `journalctl --since @…`). When `kernel_log`
    fails (e.g. no journald), `kernel_log_fallback` (typically `dmesg --time-format iso`) is read instead; the
    reading names which one answered (`journalctl` or `dmesg`). An unconfigured part is reported missing."""

    def __init__(
        self,
        commands: Mapping[str, Any],
        *,
        launcher: Callable[[Target, float], list[str]] | None = None,
        env: Mapping[str, str] | None = None,
    ) -> None:
        """`launcher` (the Slurm executor's): the argv that runs a command on the target's node, put before it,
        given the command's timeout; `env`: the commands' environment (default: the agent's)."""
        self._launcher = launcher
        self._env = env
        #: (part, vendor or "" for every vendor) → (template tokens, timeout)
        self._commands: dict[tuple[str, str], tuple[tuple[str, ...], float]] = {}
        for key, spec in commands.items():
            where = f"hardware_commands.{key}"
            if key not in HARDWARE_COMMAND_KEYS:
                raise ValueError(f"{where}: unknown part (known: {', '.join(HARDWARE_COMMAND_KEYS)})")
            if key == "nvidia_smi":
                for part in GPU_PARTS:
                    self._commands.setdefault((part, "nvidia"), _command(where, spec))
            elif key in GPU_PARTS and isinstance(spec, Mapping) and "template" not in spec:
                for vendor, vendor_spec in spec.items():
                    if vendor not in GPU_VENDORS:
                        raise ValueError(f"{where}.{vendor}: unknown GPU vendor (known: {', '.join(GPU_VENDORS)})")
                    self._commands[(key, vendor)] = _command(f"{where}.{vendor}", vendor_spec)
            else:
                self._commands[(key, "")] = _command(where, spec)

    def read(
        self,
        part: str,
        target: Target,
        *,
        phase: Phase,
        since: datetime | None = None,
        until: datetime | None = None,
    ) -> Reading:
        context = {
            "hostname": target.hostname,
            "device_id": target.device_id,
            "resource_class": target.resource_class,
            "since": _iso(since),
            "until": _iso(until),
            "since_epoch": int(since.timestamp()) if since else "",
            "until_epoch": int(until.timestamp()) if until else "",
        }
        first = self._run(part, target, context)
        if part != "kernel_log" or first.text is not None or self._configured("kernel_log_fallback", target) is None:
            return Reading(first.text, first.problem, _source_of(part, self._configured(part, target)))
        fallback = self._run("kernel_log_fallback", target, context)
        if fallback.text is None:
            return Reading(None, f"{first.problem}; fallback: {fallback.problem}")
        return Reading(
            fallback.text, None, _source_of("kernel_log_fallback", self._configured("kernel_log_fallback", target))
        )

    def _configured(self, key: str, target: Target) -> tuple[tuple[str, ...], float] | None:
        """The part's command for the target's GPU vendor, else the one for every vendor."""
        return self._commands.get((key, target.gpu_vendor)) or self._commands.get((key, ""))

    def _run(self, key: str, target: Target, context: Mapping[str, Any]) -> Reading:
        configured = self._configured(key, target)
        if configured is None:
            if key == "ib_counters":  # optional: a site without InfiniBand reads no fabric counters
                return Reading(None, NOT_CONFIGURED)
            where = f"{key}.{target.gpu_vendor}" if key in GPU_PARTS else key
            return Reading(None, f"no command configured (hardware_commands.{where})")
        tokens, timeout = configured
        try:
            argv = fill_arguments(tokens, context)
        except (KeyError, ValueError, IndexError, AttributeError) as exc:
            return Reading(None, f"hardware_commands.{key} cannot be filled in: {exc}")
        if self._launcher is not None:
            try:
                argv = self._launcher(target, timeout) + argv
            except ValueError as exc:  # the Slurm launcher's node name outside Slurm's grammar
                return Reading(None, str(exc))
        finished = _execute(argv, lambda: False, timeout, env=self._env)
        if finished.problem is not None:
            return Reading(None, with_tail(finished.problem, finished.stderr))
        if finished.returncode != 0:
            return Reading(None, with_tail(exit_text(argv[0], finished.returncode), finished.stderr or finished.stdout))
        return Reading(finished.stdout)


def _command(where: str, spec: Any) -> tuple[tuple[str, ...], float]:
    template, timeout = (spec, _HARDWARE_TIMEOUT_S) if isinstance(spec, str) else _spec(where, spec)
    try:
        tokens = tuple(shlex.split(template))
    except ValueError as exc:
        raise ValueError(f"{where}: cannot be split: {exc}") from exc
    if not tokens:
        raise ValueError(f"{where}: the template is empty")
    return tokens, timeout


def _spec(where: str, spec: Any) -> tuple[str, float]:
    if not isinstance(spec, Mapping) or not isinstance(spec.get("template"), str):
        raise ValueError(f"{where}: a command template, or a table with `template` (and `timeout`)")
    unknown = sorted(set(spec) - {"template", "timeout"})
    if unknown:
        raise ValueError(f"{where}: unknown key(s) {', '.join(unknown)} (known: template, timeout)")
    timeout = spec.get("timeout", _HARDWARE_TIMEOUT_S)
    if isinstance(timeout, bool) or not isinstance(timeout, int | float) or timeout <= 0:
        raise ValueError(f"{where}.timeout: must be a positive number of seconds, got {timeout!r}")
    return spec["template"], float(timeout)


#: The kernel log's tool by the key that read it, when its command names neither (a site's wrapper script).
_KERNEL_LOG_TOOLS = {"kernel_log": "journalctl", "kernel_log_fallback": "dmesg"}


def _source_of(key: str, configured: tuple[tuple[str, ...], float] | None) -> str | None:
    """The kernel log's tool (`health.source`: journalctl or dmesg), by the program the command names (after an
    `ssh host` prefix), else by the key: `kernel_log` is the journal, `kernel_log_fallback` dmesg."""
    if key not in _KERNEL_LOG_TOOLS or configured is None:
        return None
    names = [os.path.basename(token) for token in configured[0]]
    for tool in ("journalctl", "dmesg"):
        if tool in names:
            return tool
    return _KERNEL_LOG_TOOLS[key]


def _iso(moment: datetime | None) -> str:
    return moment.isoformat().replace("+00:00", "Z") if moment else ""


def _execute(
    argv: list[str], should_stop: Callable[[], bool], timeout_s: float, env: Mapping[str, str] | None = None
) -> _Finished:
    """Run `argv` in its own process group until it ends, `should_stop` turns true, `timeout_s` passes, or
    it prints more than `MAX_OUTPUT_BYTES` on stdout or stderr (each read by a thread of its own, in
    chunks, never kept past the cap)."""
    program = argv[0]
    try:
        process = subprocess.Popen(
            argv,
            env=None if env is None else dict(env),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )
    except FileNotFoundError:
        return _Finished(None, "", "", f"command not found: {program}")
    except PermissionError:
        return _Finished(None, "", "", f"permission denied running {program}")
    except OSError as exc:
        return _Finished(None, "", "", f"could not start {program}: {exc.strerror or exc}")

    assert process.stdout is not None and process.stderr is not None  # both piped above
    overflow = threading.Event()
    readers = [_BoundedReader(process.stdout, overflow), _BoundedReader(process.stderr, overflow)]
    deadline = time.monotonic() + timeout_s
    problem: str | None = None
    while problem is None:
        try:
            process.wait(timeout=max(0.0, min(_POLL_S, deadline - time.monotonic())))
            break
        except subprocess.TimeoutExpired:
            if overflow.is_set():
                problem = output_too_large(program)
            elif should_stop():
                problem = f"interrupted: the agent is stopping ({program} ended)"
            elif time.monotonic() >= deadline:
                problem = f"{program} timed out after {timeout_s:g} s"
    if problem is not None:
        _stop(process)
    for reader in readers:
        # After a normal exit the output is read to its end (a child may still hold the pipe), within
        # the command's time; after a stop, within the grace the stop allows.
        reader.join(_TERMINATE_GRACE_S if problem else max(_TERMINATE_GRACE_S, deadline - time.monotonic()))
    if problem is None and overflow.is_set():
        problem = output_too_large(program)
    stdout, stderr = (reader.text() for reader in readers)
    return _Finished(None if problem else process.returncode, stdout, stderr, problem)


class _BoundedReader(threading.Thread):
    """Reads one of a tool's pipes to its end, keeping at most `MAX_OUTPUT_BYTES`; past it, it keeps
    nothing and only drains (the tool never blocks on a full pipe) and sets `overflow`."""

    def __init__(self, stream: IO[bytes], overflow: threading.Event) -> None:
        super().__init__(daemon=True)
        self._stream, self._overflow = stream, overflow
        self._chunks: list[bytes] = []
        self._size = 0
        self.start()

    def run(self) -> None:
        with contextlib.suppress(OSError, ValueError):
            while chunk := self._stream.read1(_READ_CHUNK):  # type: ignore[attr-defined]
                self._size += len(chunk)
                if self._size > MAX_OUTPUT_BYTES:
                    self._overflow.set()
                    self._chunks.clear()
                else:
                    self._chunks.append(chunk)

    def text(self) -> str:
        return "" if self._size > MAX_OUTPUT_BYTES else b"".join(self._chunks).decode(errors="replace")


def _stop(process: subprocess.Popen[bytes]) -> None:
    """End the tool and everything it started: SIGTERM to its process group, SIGKILL if it lingers."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(process.pid, sig)
        try:
            process.wait(timeout=_TERMINATE_GRACE_S)
            return
        except subprocess.TimeoutExpired:
            continue
    process.wait()
