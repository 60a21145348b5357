"""Issue 42 (5): every command the agent runs is read with a size cap
(`fleet_agent.executors.base.MAX_OUTPUT_BYTES`). A tool that prints more — a device whose
`nvidia-smi -q -x` printed 1.4 GB made a 1 GiB agent die with `MemoryError` — ends as an errored
run (or a missing hardware reading) saying "output larger than N MB"; the tool is stopped, the agent
stays up and holds about the cap, never the output."""

from __future__ import annotations

import os
import time
import tracemalloc
from pathlib import Path

import pytest

from fleet_agent.executors import CommandExecutor, CommandSpec, Target, TestRun
from fleet_agent.executors.base import MAX_OUTPUT_BYTES, read_output_file
from fleet_agent.executors.command import CommandHardware

MIB = 1024 * 1024
NODE = Target(device_id="0d6c5b0e-0001", hostname="a01-n01", resource_class="gpu.h200.8x")
#: Prints 8 MiB past the cap, then would keep going for a long while.
FLOOD = f"sh -c 'head -c {MAX_OUTPUT_BYTES + 8 * MIB} /dev/zero | tr \"\\\\0\" x; sleep 30'"
SAID = f"output larger than {MAX_OUTPUT_BYTES // MIB} MB"


def _run() -> TestRun:
    return TestRun(requirement="req", test="t", parameters={}, targets=(NODE,))


@pytest.mark.process
def test_a_test_command_printing_past_the_cap_is_an_errored_run_and_is_stopped() -> None:
    executor = CommandExecutor({"t": CommandSpec(template=FLOOD, parser="nccl-all-reduce")}, timeout_s=60)
    tracemalloc.start()
    started = time.monotonic()

    outcome = executor.run(_run(), attempt=1)

    took = time.monotonic() - started
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert outcome.status == "errored"
    assert SAID in (outcome.error or ""), outcome.error
    assert took < 20, f"the tool was not stopped at the cap ({took:.0f} s)"
    assert peak < 2 * MAX_OUTPUT_BYTES + 16 * MIB, f"{peak / MIB:.0f} MiB held"


@pytest.mark.process
def test_a_hardware_reading_printing_past_the_cap_is_missing_with_the_reason() -> None:
    hardware = CommandHardware({"nvidia_smi": FLOOD})

    reading = hardware.read("gpu_inventory", NODE, phase="before")

    assert reading.text is None
    assert SAID in (reading.problem or ""), reading.problem


def test_a_slurm_jobs_output_file_past_the_cap_is_not_read(tmp_path: Path) -> None:
    big = tmp_path / "job.out"
    with big.open("wb") as out:
        out.truncate(MAX_OUTPUT_BYTES + 1)  # sparse: no disk, no time
    small = tmp_path / "ok.out"
    small.write_text("fine\n")

    assert read_output_file(small) == ("fine\n", None)
    text, problem = read_output_file(big)
    assert text == "" and problem is not None and SAID in problem
    assert read_output_file(tmp_path / "missing.out") == ("", None)
    assert os.path.getsize(big) > MAX_OUTPUT_BYTES
