"""The command executor runs real programs without a shell and turns every failure into an errored outcome."""

from __future__ import annotations

import sys
import time
from datetime import UTC
from pathlib import Path
from typing import Any

import pytest

from fleet_agent.executors import CommandExecutor, CommandSpec, Executor, Target, TestRun
from fleet_agent.parsers import parser_for

FIXTURES = Path(__file__).parent / "fixtures"
SMI_FIELDS = ",".join(
    [
        "index",
        "remapped_rows.pending",
        "remapped_rows.failure",
        "ecc.errors.uncorrected.volatile.sram",
        "temperature.gpu",
        "clocks.sm",
        "power.draw",
    ]
)
NODE = Target(device_id="0d6c5b0e-0001", hostname="a01-n01", resource_class="gpu.h200.8x")
COHORT = (
    NODE,
    Target(device_id="0d6c5b0e-0002", hostname="a01-n02", resource_class="gpu.h200.8x"),
    Target(device_id="0d6c5b0e-0003", hostname="a01-n03", resource_class="gpu.h200.8x"),
)


def executor(
    template: str, parser: str = "nccl-all-reduce", *, test: str = "t", timeout_s: float = 30
) -> CommandExecutor:
    return CommandExecutor({test: CommandSpec(template=template, parser=parser)}, timeout_s=timeout_s)


def run(parameters: dict[str, Any] | None = None, *, test: str = "t", targets: tuple[Target, ...] = (NODE,)) -> TestRun:
    return TestRun(
        requirement="req", test=test, parameters=parameters or {}, targets=targets, topology_label="rack-a01"
    )


@pytest.mark.process
@pytest.mark.parametrize(
    ("fixture", "parser"),
    [
        ("dcgm_diag_r3_h200_fail_dcgm3.json", "dcgm-diag-json"),
        ("nccl_all_reduce_h200_8gpu.txt", "nccl-all-reduce"),
        ("nvbandwidth_h200_degraded_nvlink.txt", "nvbandwidth"),
        ("nvidia_smi_h200_pending_remap.csv", f"nvidia-smi-csv:{SMI_FIELDS}"),
    ],
)
def test_a_tool_that_succeeds_reports_the_metrics_its_parser_reads(fixture: str, parser: str) -> None:
    path = FIXTURES / fixture

    outcome = executor("cat {path}", parser).run(run({"path": str(path)}), attempt=1)

    assert outcome.status == "completed"
    assert outcome.error is None
    assert outcome.metrics == parser_for(parser)(path.read_text())
    assert outcome.started_at.tzinfo is UTC and outcome.started_at <= outcome.finished_at


@pytest.mark.process
def test_the_template_is_filled_with_target_identity_and_job_parameters() -> None:
    template = (
        "sh -c 'echo \"$1|$2|$3|$4|$5|$6\" >&2; exit 7' sh "
        "{hostname} {hostnames} {device_id} {topology_label} {level} {attempt}"
    )

    outcome = executor(template).run(run({"level": 3}, targets=COHORT), attempt=2)

    assert outcome.status == "errored"
    assert outcome.error == "sh exited with status 7: a01-n01|a01-n01,a01-n02,a01-n03|0d6c5b0e-0001|rack-a01|3|2"


@pytest.mark.process
def test_a_parameter_cannot_override_the_target_hostname() -> None:
    outcome = executor("sh -c 'echo \"$1\" >&2; exit 1' sh {hostname}").run(run({"hostname": "elsewhere"}), attempt=1)

    assert outcome.error == "sh exited with status 1: a01-n01"


@pytest.mark.process
@pytest.mark.parametrize(
    ("parameters", "template", "printed"),
    [
        ({"name": "x; rm -rf / #"}, "sh -c 'echo \"$#:$1\" >&2; exit 1' sh {name}", "1:x; rm -rf / #"),
        ({"name": "two words"}, "sh -c 'echo \"$#:$1\" >&2; exit 1' sh {name}", "1:two words"),
        (
            {"testcases": ["host_to_device_memcpy_ce", "device_to_host_memcpy_ce"]},
            "sh -c 'echo \"$#:$1:$2\" >&2; exit 1' sh {testcases}",
            "2:host_to_device_memcpy_ce:device_to_host_memcpy_ce",
        ),
        ({"gpus": [0, 1, 2]}, "sh -c 'echo \"$#:$1\" >&2; exit 1' sh --gpus={gpus}", "1:--gpus=0,1,2"),
        ({"verbose": True, "extra": None}, "sh -c 'echo \"$#:$1:$2\" >&2; exit 1' sh {verbose} {extra}", "2:true:"),
    ],
    ids=["injection-stays-one-argument", "spaces-stay-one-argument", "list-fills-arguments", "list-in-text", "scalars"],
)
def test_parameters_become_arguments_without_a_shell(parameters: dict[str, Any], template: str, printed: str) -> None:
    outcome = executor(template).run(run(parameters), attempt=1)

    assert outcome.error == f"sh exited with status 1: {printed}"


@pytest.mark.process
@pytest.mark.parametrize(
    ("template", "error"),
    [
        ("sh -c 'echo starting; echo \"cuda error\" >&2; exit 3'", "sh exited with status 3: cuda error"),
        ("sh -c 'echo only stdout; exit 2'", "sh exited with status 2: only stdout"),
        ("sh -c 'exit 4'", "sh exited with status 4"),
        ("sh -c 'kill -9 $$'", "sh was killed by SIGKILL"),
    ],
)
def test_a_tool_that_fails_is_an_errored_outcome_with_the_tail_of_its_output(template: str, error: str) -> None:
    outcome = executor(template).run(run(), attempt=1)

    assert outcome.status == "errored"
    assert outcome.error == error
    assert outcome.metrics == {}


@pytest.mark.process
def test_the_error_keeps_only_the_tail_of_a_long_stderr() -> None:
    template = "sh -c 'for i in $(seq 1 200); do echo line-$i >&2; done; exit 1'"

    outcome = executor(template).run(run(), attempt=1)

    assert outcome.error is not None
    assert outcome.error.endswith("line-199\nline-200")
    assert "line-190" not in outcome.error
    assert len(outcome.error) < 1100


@pytest.mark.process
@pytest.mark.parametrize(
    "template",
    [f"{sys.executable} -c 'import time; time.sleep(5)'", "sh -c 'sleep 5; echo late'"],
    ids=["direct", "child"],
)
def test_a_tool_that_runs_past_the_timeout_is_ended_with_its_children(template: str) -> None:
    began = time.monotonic()
    outcome = executor(template, timeout_s=0.2).run(run(), attempt=1)

    assert time.monotonic() - began < 3
    assert outcome.status == "errored"
    assert outcome.error is not None and "timed out after 0.2 s" in outcome.error


@pytest.mark.process
def test_a_sleeping_tool_times_out() -> None:
    outcome = executor("sleep 5", timeout_s=0.2).run(run(), attempt=1)

    assert outcome.error == "sleep timed out after 0.2 s"


@pytest.mark.process
def test_should_stop_ends_a_running_tool() -> None:
    deadline = time.monotonic() + 0.2

    began = time.monotonic()
    outcome = executor("sleep 5").run(run(), attempt=1, should_stop=lambda: time.monotonic() >= deadline)

    assert time.monotonic() - began < 3
    assert outcome.status == "errored"
    assert outcome.error == "interrupted: the agent is stopping (sleep ended)"


@pytest.mark.process
@pytest.mark.parametrize(
    ("template", "test", "error"),
    [
        ("no-such-burn-in-tool --run", "t", "command not found: no-such-burn-in-tool"),
        ("cat {missing_parameter}", "t", "command template for test t uses unknown placeholder 'missing_parameter'"),
        ("cat {0}", "t", "command template for test t cannot be filled in"),
        ("echo", "other-test", "no command is configured for test other-test"),
    ],
)
def test_a_run_that_cannot_start_is_an_errored_outcome(template: str, test: str, error: str) -> None:
    outcome = executor(template).run(run(test=test), attempt=1)

    assert outcome.status == "errored"
    assert outcome.error is not None and outcome.error.startswith(error)


@pytest.mark.process
def test_output_the_parser_does_not_recognise_is_an_errored_outcome() -> None:
    outcome = executor("echo all good", "dcgm-diag-json").run(run(), attempt=1)

    assert outcome.status == "errored"
    assert (
        outcome.error
        == "could not read the output of echo as dcgm-diag-json: dcgmi diag output holds no JSON object: 'all good'"
    )


def test_a_run_without_targets_is_an_errored_outcome() -> None:
    outcome = executor("echo").run(run(targets=()), attempt=1)

    assert outcome.error == "test t was given no targets"


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ({"template": "dcgmi diag -r {level} -j", "parser": "dcgm-xml"}, "unknown parser"),
        ({"template": "  ", "parser": "nvbandwidth"}, "non-empty template"),
        ({"template": "sh -c 'unbalanced", "parser": "nvbandwidth"}, "cannot be split"),
        ({"template": "nvbandwidth"}, "needs a parser name"),
    ],
)
def test_a_bad_configuration_is_refused_when_the_executor_is_built(spec: dict[str, str], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        CommandExecutor({"t": spec})  # type: ignore[dict-item]


def test_a_non_positive_timeout_is_refused() -> None:
    with pytest.raises(ValueError, match="timeout_s"):
        CommandExecutor({}, timeout_s=0)


def test_workflows_advertise_single_and_multi_node_burn_in() -> None:
    assert [workflow["name"] for workflow in CommandExecutor({}).workflows()] == [
        "SingleNodeBurnInWorkflow",
        "MultiNodeBurnInCollectiveWorkflow",
    ]


def test_a_stopping_agent_does_not_start_a_tool(tmp_path: Path) -> None:
    marker = tmp_path / "started"

    outcome = executor("touch {marker}").run(run({"marker": str(marker)}), attempt=1, should_stop=lambda: True)

    assert outcome.status == "errored"
    assert outcome.error == "interrupted: the agent is stopping (not started)"
    assert not marker.exists()


def test_the_command_executor_is_an_executor() -> None:
    assert isinstance(CommandExecutor({}), Executor)
