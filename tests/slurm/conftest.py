"""A real Slurm for the Slurm executor tests: munged, slurmctld and four slurmd (fake nodes n1..n4 on this
host), started once per test session under a temporary folder and stopped after it.

Debian's `slurm-wlm` and `munge` are installed when missing (as root); a Slurm that cannot be had fails the
run under `CI=true` and skips these tests loudly elsewhere (`tests.support.system.require_tool`). Every
step the tests run records itself in a step log; the session ends with a count of Slurm jobs, steps and
tasks run.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.slurm.cluster import STEP_LOGS, SlurmCluster, SlurmTools
from tests.support.stack import stack  # noqa: F401 - the end-to-end stack fixture, shared with tests/e2e
from tests.support.system import require_tool

PACKAGES = "slurm-wlm munge"
WHY = "the Slurm executor tests"
REPLAY = Path(__file__).parent / "tools" / "replay"
FIXTURES = Path(__file__).parents[1] / "agent" / "fixtures"


@dataclass(frozen=True)
class Slurm:
    """The running cluster, as the tests use it."""

    cluster: SlurmCluster
    step_log: Path
    work: Path

    @property
    def env(self) -> dict[str, str]:
        return self.cluster.env | {"FLEET_TEST_STEP_LOG": str(self.step_log)}

    def command(self, *argv: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(list(argv), env=os.environ | self.env, capture_output=True, text=True, timeout=60)

    def job_field(self, job_id: str, name: str) -> str:
        line = self.command("scontrol", "show", "job", "-o", job_id).stdout
        return next((t.split("=", 1)[1] for t in line.split() if t.startswith(f"{name}=")), "")

    def steps(self) -> list[tuple[str, str, str]]:
        """(job.step, node, rank) of every task the tests' tools ran so far."""
        if not self.step_log.exists():
            return []
        return [tuple(line.split()) for line in self.step_log.read_text().splitlines() if line.strip()]  # type: ignore[misc]

    def replay(self, fixture: str, sleep_s: float = 0, status: int = 0) -> str:
        """A command template that prints a recorded real tool output from `tests/agent/fixtures`."""
        return f"{REPLAY} {FIXTURES / fixture} {sleep_s:g} {status}"


@pytest.fixture(scope="session")
def slurm(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Slurm]:
    tools = SlurmTools(
        munged=require_tool("munged", package=PACKAGES, why=WHY),
        slurmctld=require_tool("slurmctld", package=PACKAGES, why=WHY),
        slurmd=require_tool("slurmd", package=PACKAGES, why=WHY),
        scontrol=require_tool("scontrol", package=PACKAGES, why=WHY),
        sinfo=require_tool("sinfo", package=PACKAGES, why=WHY),
    )
    for client in ("sbatch", "srun", "scancel", "squeue"):
        require_tool(client, package=PACKAGES, why=WHY)
    if os.geteuid() != 0:
        message = f"!!! {WHY} start slurmd and munged, which needs root; run the tests as root (CI does)"
        if os.environ.get("CI") == "true":
            pytest.fail(message, pytrace=False)
        pytest.skip(message)
    root = tmp_path_factory.mktemp("slurm")
    # munged runs as user munge and refuses folders it cannot reach: pytest's own temporary root is 0700.
    cluster_root = Path(tempfile.mkdtemp(prefix="fleet-slurm-"))
    cluster_root.chmod(0o755)
    cluster = SlurmCluster(cluster_root, tools)
    try:
        cluster.start()
    except (RuntimeError, OSError, KeyError) as exc:
        cluster.stop()
        message = f"!!! could not start a private Slurm for {WHY}: {exc}"
        if os.environ.get("CI") == "true":
            pytest.fail(message, pytrace=False)
        pytest.skip(message)
    step_log = root / "steps.log"
    STEP_LOGS.append(step_log)
    try:
        yield Slurm(cluster, step_log, root / "work")
    finally:
        cluster.stop()
        shutil.rmtree(cluster_root, ignore_errors=True)
