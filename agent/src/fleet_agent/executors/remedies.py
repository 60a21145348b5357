"""The remediation ladder's steps on a node through configured commands (`remedy_commands`, docs/remediation.md).

The service asks for a step (a GPU reset, a reboot) with a `remediation` job; the command and Slurm executors take
it with the configured command, e.g.

    remedy_commands:
      reset_gpu: "ssh {hostname} sudo nvidia-smi -r -i {gpu}"
      reboot: "ssh {hostname} sudo systemctl reboot"
      ready: {template: "ssh -o ConnectTimeout=5 {hostname} true", timeout: 1800}

Placeholders: `hostname`, `device_id`, `gpu` (the first GPU's PCI bus id the events named; `nvidia-smi -i` takes a
bus id), `gpus` (all of them, comma-separated). After a reboot, `ready` (when configured) is run every
`READY_POLL_S` seconds until it succeeds or its timeout passes: the node is back and the burn-in may run. A step
without a command fails (the service's ladder goes on from it): the agent never guesses how to reboot a node.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from typing import Any

from fleet_agent.executors.base import Remedial, RemedyResult, RemedyRun, Target
from fleet_agent.executors.tooling import exit_text, fill_arguments, with_tail
from fleet_rules.health_evidence import is_pci_bus_id

__all__ = ["REMEDY_KEYS", "CommandRemedies", "SlurmRemedies", "remedy_take"]

logger = logging.getLogger("fleet_agent")

REMEDY_KEYS: tuple[str, ...] = ("reset_gpu", "reboot", "ready")
READY_POLL_S = 10.0
_READY_PROBE_S = 30.0  # one probe of `ready`; its own timeout bounds the whole wait


class CommandRemedies:
    """Takes ladder steps with `remedy_commands` (see the module docstring)."""

    def __init__(self, commands: Mapping[str, Any] | None, execute: Callable[..., Any]) -> None:
        """`execute(argv, should_stop, timeout, target)` runs a command for the target's node."""
        from fleet_agent.executors.command import _command  # the hardware commands' own spelling

        unknown = sorted(set(commands or {}) - set(REMEDY_KEYS))
        if unknown:
            raise ValueError(f"remedy_commands: unknown key(s) {', '.join(unknown)} (known: {', '.join(REMEDY_KEYS)})")
        self._commands = {key: _command(f"remedy_commands.{key}", spec) for key, spec in (commands or {}).items()}
        self._execute = execute

    def remedy(self, run: RemedyRun, *, should_stop: Callable[[], bool] = lambda: False) -> RemedyResult:
        done = self._run(run.step, run, should_stop)
        if not done.ok or run.step != "reboot" or "ready" not in self._commands:
            return done
        _, timeout = self._commands["ready"]
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and not should_stop():
            if self._run("ready", run, should_stop).ok:
                return done
            time.sleep(READY_POLL_S)
        return RemedyResult(False, f"the node did not come back within {timeout:g} s of its reboot")

    def _run(self, key: str, run: RemedyRun, should_stop: Callable[[], bool]) -> RemedyResult:
        configured = self._commands.get(key)
        if configured is None:
            return RemedyResult(False, f"no command configured for {key} (remedy_commands.{key})")
        tokens, timeout = configured
        hostile = [gpu for gpu in run.gpus if not is_pci_bus_id(gpu)]
        if hostile:  # the machine's text: never a word of a command
            return RemedyResult(False, f"{hostile[0][:64]!r} is not a PCI bus id: no {key} command is run with it")
        context = {
            "hostname": run.target.hostname,
            "device_id": run.target.device_id,
            "gpu": run.gpus[0] if run.gpus else "",
            "gpus": ",".join(run.gpus),
        }
        try:
            argv = fill_arguments(tokens, context)
        except (KeyError, ValueError, IndexError, AttributeError) as exc:
            return RemedyResult(False, f"remedy_commands.{key} cannot be filled in: {exc}")
        limit = min(timeout, _READY_PROBE_S) if key == "ready" else timeout
        finished = self._execute(argv, should_stop, limit, run.target)
        if finished.problem is not None:
            return RemedyResult(False, with_tail(finished.problem, finished.stderr))
        if finished.returncode != 0:
            return RemedyResult(
                False, with_tail(exit_text(argv[0], finished.returncode), finished.stderr or finished.stdout)
            )
        return RemedyResult(True, f"{key}: {' '.join(argv)}")


class SlurmRemedies:
    """The Slurm executor's steps: a GPU reset is `remedy_commands.reset_gpu` run as a one-task step on the node
    (like a hardware reading); a reboot is `scontrol reboot ASAP nextstate=RESUME reason="fleet-burnin: …" <node>`
    (Slurm drains the node, reboots it once idle and resumes it; the burn-in submitted after it waits in the queue
    until then). The node gate's ownership rules hold: a node drained or down by someone else is never rebooted
    (`fleet_rules.node_gate.reboot_refusal`)."""

    def __init__(self, executor: Any, commands: Mapping[str, Any] | None) -> None:
        self._executor = executor
        self._commands = CommandRemedies(commands, self._on_node)

    def remedy(self, run: RemedyRun, *, should_stop: Callable[[], bool] = lambda: False) -> RemedyResult:
        if run.step != "reboot":
            return self._commands.remedy(run, should_stop=should_stop)
        from fleet_agent.node_gate import parse_nodes
        from fleet_rules.node_gate import REASON_PREFIX, reboot_refusal

        node = self._executor.settings.slurm_node(run.target.hostname)
        shown = self._executor._tool(["scontrol", "show", "node", "-o", node])
        if shown.returncode != 0:
            return RemedyResult(False, with_tail(f"scontrol show node {node} failed", shown.stderr or shown.stdout))
        refusal = reboot_refusal(parse_nodes(shown.stdout).get(node))
        if refusal is not None:
            return RemedyResult(False, f"{node}: {refusal}")
        reason = f"{REASON_PREFIX} remediation reboot"
        done = self._executor._tool(["scontrol", "reboot", "ASAP", "nextstate=RESUME", f"reason={reason}", node])
        if done.returncode != 0:
            return RemedyResult(False, with_tail(f"scontrol reboot {node} failed", done.stderr or done.stdout))
        return RemedyResult(True, f"scontrol reboot ASAP nextstate=RESUME {node}")

    def _on_node(self, argv: list[str], should_stop: Callable[[], bool], timeout: float, target: Target) -> Any:
        from fleet_agent.executors.command import _execute

        prefix = self._executor._hardware_step(target, timeout)
        return _execute(prefix + argv, should_stop, timeout, env=self._executor._environ)


def remedy_take(
    executor: Any, job: Mapping[str, Any], vendor_of: Callable[[str], str], should_stop: Callable[[], bool]
) -> str | None:
    """Take the step a `remediation` job carries (`parameters.remedy`) before its burn-in runs: None when the job
    carries none or the step went well, else why not (the job then fails with it and runs no burn-in)."""
    remedy = (job.get("parameters") or {}).get("remedy")
    if not remedy:
        return None
    from fleet_agent.targets import device_target

    step = str(remedy.get("step") or "")
    if not isinstance(executor, Remedial):
        return f"the {getattr(executor, 'name', 'configured')} executor cannot take a {step} step"
    devices = job.get("devices") or []
    if len(devices) != 1:
        return f"a {step} step needs exactly one device, the job has {len(devices)}"
    run = RemedyRun(step, device_target(devices[0], vendor_of), tuple(str(g) for g in remedy.get("gpus") or ()))
    try:
        done = executor.remedy(run, should_stop=should_stop)
    except Exception as exc:  # an executor's defect must fail the job, not leave the device held
        logger.exception("the %s step on %s failed", step, run.target.hostname)
        return f"the {step} step failed: {exc}"
    if done.ok:
        logger.info("took the %s step on %s: %s", step, run.target.hostname, done.detail)
        return None
    return f"the {step} step failed: {done.detail}"
