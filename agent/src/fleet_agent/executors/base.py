"""What an executor is: the agent hands it one test run, it hands back one outcome.

The agent owns everything around a run (claiming the job, choosing the attempt number, reporting the
execution, evaluating it); an executor only runs the test and turns what the tool said into metrics.
A test that finds bad hardware is a `completed` outcome with bad metrics; only a run that could not judge
the hardware (the tool crashed, timed out or printed nonsense, the agent is stopping) is `errored`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal, Protocol, runtime_checkable

from fleet_agent.executors.snapshot import FabricSnapshot, HealthSnapshot

__all__ = [
    "COMPLETED",
    "ERRORED",
    "WORKFLOWS",
    "Executor",
    "Remedial",
    "RemedyResult",
    "RemedyRun",
    "Resumable",
    "RunLedger",
    "Target",
    "TestOutcome",
    "TestRun",
    "errored",
    "utc_now",
]

COMPLETED: Literal["completed"] = "completed"
ERRORED: Literal["errored"] = "errored"

WORKFLOWS: tuple[dict[str, str], ...] = (
    {"name": "SingleNodeBurnInWorkflow", "version": "1"},
    {"name": "MultiNodeBurnInCollectiveWorkflow", "version": "1"},
)


@dataclass(frozen=True)
class Target:
    """One device a test runs on."""

    device_id: str
    hostname: str
    resource_class: str
    #: Who made its GPUs (`fleet_agent.gpus`): which tools read its hardware.
    gpu_vendor: str = "nvidia"


@dataclass(frozen=True)
class TestRun:
    """One test of one requirement on its targets: a single device, or a multi-node cohort."""

    __test__ = False

    requirement: str
    test: str
    parameters: dict[str, Any]
    targets: tuple[Target, ...]
    topology_label: str | None = None
    #: A collective's topology unit (`rack`, `nvlink-domain`): which fabric it crosses.
    topology_unit: str | None = None
    #: The execution this run reports as; executors that hand work to another system (Slurm) key what they
    #: remember across an agent restart by it.
    execution_id: str | None = None
    #: The `health-window` test only: where the job's window starts, and the health snapshot read then (a
    #: `HealthSnapshot`); without them the window is the test's own run.
    window_since: datetime | None = None
    health_before: HealthSnapshot | None = None
    #: ... and the InfiniBand ports' error counters read then (a `FabricSnapshot`).
    fabric_before: FabricSnapshot | None = None


@dataclass(frozen=True)
class TestOutcome:
    """How a run ended; `status` is `completed` or `errored`, and the timestamps are aware UTC."""

    __test__ = False

    status: str
    metrics: dict[str, Any]
    error: str | None
    started_at: datetime
    finished_at: datetime
    #: The `health-window` test's evidence (the execution report's `health` object), else None.
    health: dict[str, Any] | None = None


@runtime_checkable
class Executor(Protocol):
    """Runs burn-in tests; `run` never raises for a failing test or a failing tool."""

    name: str

    def workflows(self) -> list[dict[str, str]]:
        """The workflows (name and version) the agent advertises in its heartbeat."""
        ...

    def run(self, run: TestRun, *, attempt: int, should_stop: Callable[[], bool] = lambda: False) -> TestOutcome:
        """Run `run` for the `attempt`-th time (1-based, per requirement and target) and report how it ended."""
        ...


@dataclass(frozen=True)
class RemedyRun:
    """A step of the service's remediation ladder on one device: a `remediation` job's `parameters.remedy`
    (docs/remediation.md). The agent takes it before the job's burn-in runs again."""

    step: str  # reset_gpu | reboot
    target: Target
    gpus: tuple[str, ...] = ()  # the PCI bus ids of the GPUs the events named
    reason: str = ""


@dataclass(frozen=True)
class RemedyResult:
    """How a step went: `ok`, or why not (the job then fails with it and runs no burn-in)."""

    ok: bool
    detail: str = ""


@runtime_checkable
class Remedial(Protocol):
    """An executor that can take a step of the remediation ladder on a device."""

    def remedy(self, run: RemedyRun, *, should_stop: Callable[[], bool] = lambda: False) -> RemedyResult:
        """Take the step (reset the GPUs, reboot the node) and say how it went; never raises for a failing tool."""
        ...


class RunLedger(Protocol):
    """Where an executor records work it handed to another system, so that a restarted agent finds it."""

    def remote_started(self, execution_id: str, record: Mapping[str, Any]) -> None: ...

    def remote_finished(self, execution_id: str) -> None: ...


@runtime_checkable
class Resumable(Protocol):
    """An executor whose runs outlive the agent (a Slurm job): after a restart it can pick a run up again
    from the record it left in the `RunLedger`, or cancel it."""

    def resume(self, record: Mapping[str, Any], *, should_stop: Callable[[], bool] = lambda: False) -> TestOutcome:
        """Wait for the recorded run to end (cancelling it if `should_stop` turns true) and report how it ended."""
        ...

    def cancel(self, record: Mapping[str, Any]) -> str:
        """Cancel the recorded run if it still runs; returns a short description for the execution's error."""
        ...


def utc_now() -> datetime:
    """The current time, timezone-aware, so that reported timestamps are unambiguous."""
    return datetime.now(UTC)


def errored(message: str, started_at: datetime, finished_at: datetime | None = None) -> TestOutcome:
    """An outcome for a run that could not judge the hardware."""
    return TestOutcome(
        status=ERRORED,
        metrics={},
        error=message,
        started_at=started_at,
        finished_at=finished_at or utc_now(),
    )


#: The most the agent reads of what one command prints (each of stdout and stderr) or of a Slurm job's
#: output file. Real tools print far less (`nvidia-smi -q -x` of 8 GPUs: about 200 kB; a DCGM diag's JSON
#: under 1 MB); a tool that prints more is stopped and its run errors, so a hostile or broken machine under
#: test cannot make the agent hold its output (1.4 GB made a 1 GiB agent die with `MemoryError`).
MAX_OUTPUT_BYTES = 32 * 1024 * 1024


def output_too_large(what: str) -> str:
    """The one reason a run or a reading gives when `what` printed past `MAX_OUTPUT_BYTES`."""
    return f"{what}: output larger than {MAX_OUTPUT_BYTES // (1024 * 1024)} MB (MAX_OUTPUT_BYTES); not read"


def read_output_file(path: Any) -> tuple[str, str | None]:
    """A job's output file as text (missing or unreadable: empty), or ("", why) when it is larger than
    `MAX_OUTPUT_BYTES`: never more than the cap is read."""
    if not path:
        return "", None
    try:
        with open(str(path), "rb") as file:
            data = file.read(MAX_OUTPUT_BYTES + 1)
    except OSError:
        return "", None
    if len(data) > MAX_OUTPUT_BYTES:
        return "", output_too_large(str(path))
    return data.decode(errors="replace"), None
