"""What every executor that runs real tools shares: the `commands` table, filling a template in, and
turning a finished tool's output into an outcome through its parser.

The `command` executor runs the filled-in arguments itself (over ssh, mpirun, ...); the `slurm` executor
runs the same arguments as a Slurm step. Both read their output with the same parsers, so a tool's output
means the same thing whichever way it ran.

A template is split into arguments first and each argument is formatted afterwards, and no shell is
involved: a job parameter or hostname therefore always stays one argument and can never smuggle in another
command (a list parameter that fills a whole argument, such as `-t {testcases}`, becomes one argument per
item). Placeholders: `hostname`, `device_id` (the first target: the device, or the launcher of a cohort),
`hostnames` and `device_ids` (the cohort, comma-joined), `topology_label`, `resource_class`, `test`,
`requirement`, `attempt`, and every job parameter (target identity wins over a parameter of the same name).
Literal braces in a template are written doubled, as in `str.format`.
"""

from __future__ import annotations

import json
import os
import shlex
import signal
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, TypedDict

from fleet_agent.executors.base import COMPLETED, TestOutcome, TestRun, errored
from fleet_agent.parsers import FACT_PARSERS, ParseError, Parser, parser_for
from fleet_rules.gpu_vendors import vendor_of_parser, vendor_of_test

__all__ = [
    "CommandSpec",
    "PreparedCommand",
    "TemplateError",
    "exit_text",
    "fill_arguments",
    "outcome_of_output",
    "prepare_commands",
    "render_argv",
    "with_tail",
]

_TAIL_LINES = 10
_TAIL_CHARS = 1000
_COMMON_KEYS = frozenset({"template", "parser", "timeout"})


class CommandSpec(TypedDict, total=False):
    """How to run one test: an argument template, the name of the parser for its stdout, and optionally
    its own timeout in seconds (else the executor's). Executors may accept further keys of their own."""

    template: str
    parser: str
    timeout: float


class TemplateError(ValueError):
    """A template cannot be filled in for this run; the message says why."""


@dataclass(frozen=True)
class PreparedCommand:
    """A checked `CommandSpec`: split template, resolved parser and the executor-specific extra keys."""

    test: str
    tokens: tuple[str, ...]
    parser_name: str
    parse: Parser
    timeout_s: float | None
    extra: Mapping[str, Any]


def prepare_commands(
    commands: Mapping[str, Mapping[str, Any]], *, key: str = "commands", extra_keys: frozenset[str] = frozenset()
) -> dict[str, PreparedCommand]:
    """Check every spec up front, so a typo in the configuration stops the agent at start, not mid-job.

    Errors are `ValueError`s naming the configuration key (`commands.<test>.<field>`).
    """
    prepared: dict[str, PreparedCommand] = {}
    for test, spec in commands.items():
        where = f"{key}.{test}"
        owner = vendor_of_test(test)
        if not isinstance(spec, Mapping):
            raise ValueError(f"{where}: must be a table with `template` and `parser`")
        unknown = sorted(set(spec) - _COMMON_KEYS - extra_keys)
        if unknown:
            allowed = ", ".join(sorted(_COMMON_KEYS | extra_keys))
            raise ValueError(f"{where}: unknown key(s) {', '.join(unknown)} (known: {allowed})")
        template, parser_name = spec.get("template"), spec.get("parser")
        if not isinstance(template, str) or not template.strip():
            raise ValueError(f"{where}.template: the command for test {test!r} needs a non-empty template")
        if not isinstance(parser_name, str):
            raise ValueError(f"{where}.parser: the command for test {test!r} needs a parser name")
        try:
            tokens = tuple(shlex.split(template))
        except ValueError as exc:
            raise ValueError(f"{where}.template: cannot be split: {exc}") from exc
        try:
            parse = parser_for(parser_name)
        except ValueError as exc:
            raise ValueError(f"{where}.parser: {exc}") from exc
        if parser_name in FACT_PARSERS:
            raise ValueError(
                f"{where}.parser: {parser_name} reads hardware facts for the inventory, not a test's metrics "
                "(configure it under hardware_commands)"
            )
        reads = vendor_of_parser(parser_name)
        if owner is not None and reads is not None and reads != owner:
            raise ValueError(
                f"{where}.parser: {parser_name} reads a {reads.value} tool's output; test {test!r} runs "
                f"{owner.value}'s (fleet_rules.gpu_vendors)"
            )
        timeout = spec.get("timeout")
        if timeout is not None and (isinstance(timeout, bool) or not isinstance(timeout, int | float) or timeout <= 0):
            raise ValueError(f"{where}.timeout: must be a positive number of seconds, got {timeout!r}")
        extra = {name: spec[name] for name in extra_keys if name in spec}
        prepared[test] = PreparedCommand(
            test, tokens, parser_name, parse, float(timeout) if timeout is not None else None, extra
        )
    return prepared


def render_argv(prepared: PreparedCommand, run: TestRun, attempt: int) -> list[str]:
    """The command line for `run`; `TemplateError` when the template cannot be filled in."""
    if not run.targets:
        raise TemplateError(f"test {run.test} was given no targets")
    try:
        argv = _argv(prepared.tokens, _context(run, attempt))
    except KeyError as exc:
        raise TemplateError(f"command template for test {run.test} uses unknown placeholder {exc}") from exc
    except (ValueError, IndexError, AttributeError) as exc:
        raise TemplateError(f"command template for test {run.test} cannot be filled in: {exc}") from exc
    if not argv:
        raise TemplateError(f"command template for test {run.test} is empty once filled in")
    return argv


def command_line(
    commands: Mapping[str, PreparedCommand], run: TestRun, attempt: int, started_at: datetime
) -> tuple[PreparedCommand, list[str]] | TestOutcome:
    """The test's prepared command and its filled-in command line, or the errored outcome that
    says why there is none (no command configured, a template that cannot be filled in)."""
    prepared = commands.get(run.test)
    if prepared is None:
        return errored(f"no command is configured for test {run.test}", started_at)
    try:
        return prepared, render_argv(prepared, run, attempt)
    except TemplateError as exc:
        return errored(str(exc), started_at)


def outcome_of_output(
    prepared: PreparedCommand,
    program: str,
    stdout: str,
    run: TestRun,
    started_at: datetime,
    finished_at: datetime,
) -> TestOutcome:
    """A finished tool's stdout through its parser: `completed` with metrics, or `errored` when unreadable."""
    try:
        metrics = prepared.parse(stdout, run.parameters)
    except ParseError as exc:
        return errored(
            f"could not read the output of {os.path.basename(program)} as {prepared.parser_name}: {exc}",
            started_at,
            finished_at,
        )
    return TestOutcome(status=COMPLETED, metrics=metrics, error=None, started_at=started_at, finished_at=finished_at)


def exit_text(program: str, returncode: int | None) -> str:
    program = os.path.basename(program)
    if returncode is not None and returncode < 0:
        try:
            name = signal.Signals(-returncode).name
        except ValueError:
            name = f"signal {-returncode}"
        return f"{program} was killed by {name}"
    return f"{program} exited with status {returncode}"


def with_tail(message: str, output: str) -> str:
    """`message`, followed by the last lines of `output` (short enough for an execution's error)."""
    lines = [line.rstrip() for line in output.strip().splitlines() if line.strip()]
    tail = "\n".join(lines[-_TAIL_LINES:])
    if len(tail) > _TAIL_CHARS:
        tail = "…" + tail[-(_TAIL_CHARS - 1) :]
    return f"{message}: {tail}" if tail else message


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


def fill_arguments(tokens: tuple[str, ...], context: Mapping[str, Any]) -> list[str]:
    """Split-then-fill for templates outside the `commands` table (the hardware commands): each token formatted
    with `context`, so a value never becomes another argument. `KeyError` names an unknown placeholder."""
    return _argv(tokens, context)


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
