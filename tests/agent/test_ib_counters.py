"""InfiniBand port error counters across a burn-in window (issue 38, item 4): the parsers on real sysfs and
perfquery outputs (tests/agent/fixtures/SOURCES.md), the local sysfs reader's caps and name checks, the window's
deltas, and the health window that reports them."""

from __future__ import annotations

import os
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from fleet_agent.executors.base import Target, TestRun
from fleet_agent.executors.command import CommandHardware
from fleet_agent.executors.hardware import NOT_CONFIGURED, Reading, fabric_snapshot, health_window
from fleet_agent.executors.simulated_hardware import SimulatedHardware, parse_health_faults
from fleet_agent.fabric import fabric_evidence, fabric_metrics
from fleet_agent.parsers import ParseError
from fleet_agent.parsers.ib_counters import IB_COUNTERS, parse_ib_counters, read_ib_counters_directory
from fleet_rules.evaluator import evaluate

FIXTURES = Path(__file__).parent / "fixtures"
H200 = "gpu.h200.8x"
SYSFS = (FIXTURES / "ib_counters_sysfs_h100_gpud.txt").read_text()
FABRIC_RULES = [
    {"metric": "ib_link_downed_delta", "statistic": None, "comparator": "eq", "threshold": 0},
    {"metric": "ib_symbol_error_delta", "statistic": None, "comparator": "lt", "threshold": 10},
    {"metric": "ib_port_rcv_errors_delta", "statistic": None, "comparator": "lt", "threshold": 10},
]


def with_value(text: str, path_tail: str, value: str) -> str:
    """The sysfs listing with one file's value replaced (`mlx5_0/ports/1/counters/link_downed`)."""
    lines = text.splitlines()
    hits = [i for i, line in enumerate(lines) if line.split(":", 1)[0].endswith(path_tail)]
    assert len(hits) == 1, path_tail
    lines[hits[0]] = f"{lines[hits[0]].split(':', 1)[0]}:{value}"
    return "\n".join(lines) + "\n"


def judged(metrics: dict[str, Any], rules: list[dict[str, Any]] = FABRIC_RULES) -> dict[str, Any]:
    return evaluate(status="completed", metrics=metrics, rules=rules, error=None)


# --- the parsers on real outputs --------------------------------------------------------------------------------


def test_a_real_h100_hosts_sysfs_counters_are_read_per_port() -> None:
    parsed = parse_ib_counters(SYSFS)

    assert parsed["source"] == "sysfs"
    ports = parsed["ports"]
    assert sorted(ports) == [*(f"mlx5_{i}/1" for i in (0, 1, 4, 5, 6, 7, 8, 9)), "mlx5_bond_0/1"]
    assert {port["state"] for port in ports.values()} == {"ACTIVE"}
    assert all(set(port["counters"]) == set(IB_COUNTERS) and port["saturating"] for port in ports.values())
    assert ports["mlx5_0/1"]["counters"]["port_rcv_errors"] == 14
    assert ports["mlx5_1/1"]["counters"]["link_downed"] == 255  # the 8-bit counter stands at its maximum


def test_perfquery_extended_and_ofed1_outputs_are_read_under_their_lid_and_port() -> None:
    extended = parse_ib_counters((FIXTURES / "ib_counters_perfquery_x_rhel75.txt").read_text())
    old = parse_ib_counters((FIXTURES / "ib_counters_perfquery_ofed1.txt").read_text())

    assert extended["source"] == old["source"] == "perfquery"
    assert list(extended["ports"]) == ["lid10/1"] and list(old["ports"]) == ["lid936/1"]
    # -x prints the extended (64-bit where supported) counters: they do not saturate at the PortCounters widths
    assert extended["ports"]["lid10/1"]["saturating"] is False and old["ports"]["lid936/1"]["saturating"] is True
    assert extended["ports"]["lid10/1"]["counters"] == dict.fromkeys(IB_COUNTERS, 0)
    # OFED 1.x's short names (SymbolErrors, LinkDowned, RcvErrors, …) are the same counters
    assert old["ports"]["lid936/1"]["counters"] == dict.fromkeys(IB_COUNTERS, 0)
    assert old["ports"]["lid936/1"]["state"] is None  # perfquery does not print the port's state


def test_several_perfquery_blocks_are_several_ports() -> None:
    text = (FIXTURES / "ib_counters_perfquery_ofed1.txt").read_text()
    both = text + text.replace("Lid 936 port 1", "Lid 937 port 1").replace(
        "LinkDowned:......................0", "LinkDowned:......................3"
    )

    ports = parse_ib_counters(both)["ports"]

    assert ports["lid936/1"]["counters"]["link_downed"] == 0 and ports["lid937/1"]["counters"]["link_downed"] == 3


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("/sys/class/infiniband/../ports/1/counters/link_downed:0\n", "not an InfiniBand device and port"),
        ("/sys/class/infiniband/mlx5 0/ports/1/counters/link_downed:0\n", "not an InfiniBand device and port"),
        ("/sys/class/infiniband/mlx5_0/ports/x1/counters/link_downed:0\n", "not an InfiniBand device and port"),
        ("/sys/class/infiniband/mlx5_0/ports/1/counters/link_downed:-1\n", "not a counter value"),
        ("/sys/class/infiniband/mlx5_0/ports/1/counters/link_downed:18446744073709551616\n", "not a counter value"),
        ("/sys/class/infiniband/mlx5_0/ports/1/state:ACTIVE; rm -rf\n", "not a port state"),
        ("Permission denied (publickey).\n", "line not understood"),
        ("", "no InfiniBand port"),
        ("ibwarn: [3] mad_rpc_open_port: can't open UMAD port ((null):0)\n", "perfquery failed"),
        ("# Port counters: Lid 1 port 1\nSymbolErrorCounter:....lots\n", "not a counter value"),
    ],
)
def test_output_that_is_not_counters_is_refused_by_name(text: str, says: str) -> None:
    with pytest.raises(ParseError, match=says):
        parse_ib_counters(text)


def test_counters_the_window_does_not_judge_are_skipped_and_the_reading_is_capped() -> None:
    extra = SYSFS + "/sys/class/infiniband/mlx5_0/ports/1/counters/port_xmit_data:123456789012\n"
    assert parse_ib_counters(extra) == parse_ib_counters(SYSFS)
    with pytest.raises(ParseError, match="at most"):
        parse_ib_counters("x" * (4 * 1024 * 1024 + 1))
    many = "".join(f"/sys/class/infiniband/mlx5_{i}/ports/1/counters/link_downed:0\n" for i in range(300))
    with pytest.raises(ParseError, match="more than 256"):
        parse_ib_counters(many)


# --- the local sysfs reader -------------------------------------------------------------------------------------


def write_tree(root: Path, text: str) -> None:
    """A `/sys/class/infiniband` holding the listing's files."""
    for line in text.splitlines():
        path, value = line.split(":", 1)
        target = root / path.removeprefix("/sys/class/infiniband/")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(value + "\n")


def test_the_local_reader_reads_what_grep_prints_and_ignores_names_that_are_not_adapters(tmp_path: Path) -> None:
    root = tmp_path / "infiniband"
    write_tree(root, SYSFS)
    (root / "mlx5 evil" / "ports" / "1" / "counters").mkdir(parents=True)  # not an adapter's name: never opened
    (root / "mlx5 evil" / "ports" / "1" / "counters" / "link_downed").write_text("999\n")
    (root / "mlx5_0" / "ports" / "..x").mkdir()  # not a port number
    (root / "mlx5_0" / "ports" / "1" / "counters" / "port_xmit_data").write_text("77\n")

    assert read_ib_counters_directory(root) == parse_ib_counters(SYSFS)


def test_the_local_reader_reads_at_most_64_bytes_of_a_file(tmp_path: Path) -> None:
    root = tmp_path / "infiniband"
    write_tree(root, "/sys/class/infiniband/mlx5_0/ports/1/counters/link_downed:0")
    counters = root / "mlx5_0" / "ports" / "1" / "counters"
    # a number, then more than the first 64 bytes hold: only the number is read
    (counters / "symbol_error").write_text("5" + " " * 63 + "garbage that is never read" * 100_000)
    assert read_ib_counters_directory(root)["ports"]["mlx5_0/1"]["counters"]["symbol_error"] == 5

    (counters / "symbol_error").write_text("1" * 10_000_000)
    with pytest.raises(ParseError, match="not a counter value"):
        read_ib_counters_directory(root)  # 64 digits read: not a counter


def test_a_counter_the_kernel_does_not_expose_is_missing_not_zero(tmp_path: Path) -> None:
    root = tmp_path / "infiniband"
    write_tree(root, "/sys/class/infiniband/mlx5_0/ports/1/counters/link_downed:2")
    if os.geteuid() != 0:  # root reads whatever its mode says
        locked = root / "mlx5_0" / "ports" / "1" / "counters" / "symbol_error"
        locked.write_text("5\n")
        locked.chmod(0)

    port = read_ib_counters_directory(root)["ports"]["mlx5_0/1"]

    assert port["counters"]["link_downed"] == 2 and "port_rcv_errors" not in port["counters"]
    assert port["state"] is None
    with pytest.raises(ParseError, match="no InfiniBand port"):
        read_ib_counters_directory(tmp_path / "absent")


@pytest.mark.process
def test_the_documented_grep_reading_through_the_command_executor_is_what_the_parser_reads(tmp_path: Path) -> None:
    root = tmp_path / "infiniband"
    write_tree(root, SYSFS)
    (root / "mlx5_0" / "ports" / "1" / "counters" / "VL15_dropped").write_text("0\n")  # a counter not judged
    hardware = CommandHardware({"ib_counters": f"sh -c 'grep -H . {root}/*/ports/*/counters/* {root}/*/ports/*/state'"})

    reading = hardware.read("ib_counters", Target("d", "h", H200), phase="before")

    assert reading.text is not None, reading.problem
    assert parse_ib_counters(reading.text) == parse_ib_counters(SYSFS)
    assert CommandHardware({}).read("ib_counters", Target("d", "h", H200), phase="before").problem == NOT_CONFIGURED


# --- the window's deltas ----------------------------------------------------------------------------------------


def ports(text: str) -> dict[str, Any]:
    return parse_ib_counters(text)["ports"]


def test_a_link_that_went_down_and_came_back_is_a_delta_and_a_flap() -> None:
    healthy = with_value(SYSFS, "mlx5_1/ports/1/counters/link_downed", "0")  # a port whose counters were reset
    after = with_value(healthy, "mlx5_0/ports/1/counters/link_downed", "2")
    after = with_value(after, "mlx5_0/ports/1/counters/symbol_error", "9")

    metrics = fabric_metrics(ports(healthy), ports(after))

    assert metrics["ib_link_downed_delta"]["value"] == 2
    assert metrics["ib_link_downed_delta"]["statistics"]["mlx5_0/1"] == 2
    assert metrics["ib_link_downed_delta"]["statistics"]["mlx5_4/1"] == 0
    assert metrics["ib_link_flaps"]["value"] == 2  # the worst port's
    assert metrics["ib_symbol_error_delta"]["value"] == 9 and metrics["ib_port_rcv_errors_delta"]["value"] == 0
    verdict = judged(metrics)
    assert not verdict["passed"] and "ib_link_downed_delta" in verdict["reason"]
    assert judged(fabric_metrics(ports(healthy), ports(healthy)))["passed"]


def test_a_link_that_went_down_and_stayed_down_is_a_delta_but_not_a_flap() -> None:
    healthy = with_value(SYSFS, "mlx5_1/ports/1/counters/link_downed", "0")
    after = with_value(healthy, "mlx5_0/ports/1/counters/link_downed", "1")
    after = with_value(after, "mlx5_0/ports/1/state", "1: DOWN")

    metrics = fabric_metrics(ports(healthy), ports(after))

    assert metrics["ib_link_downed_delta"]["value"] == 1 and metrics["ib_link_flaps"]["value"] == 0


def test_a_saturated_counter_gives_no_delta_and_fails_closed() -> None:
    # the real host's mlx5_1 stands at link_downed 255: another link-down would not show
    metrics = fabric_metrics(ports(SYSFS), ports(SYSFS))

    assert "value" not in metrics["ib_link_downed_delta"] and "value" not in metrics["ib_link_flaps"]
    assert metrics["ib_link_downed_delta"]["statistics"]["mlx5_1/1"] is None
    assert metrics["ib_symbol_error_delta"]["value"] == 0
    assert not judged(metrics)["passed"]
    evidence = fabric_evidence("sysfs", ports(SYSFS), ports(SYSFS))
    saturated = {row["port"]: row["saturated"] for row in evidence["ports"] if row["saturated"]}
    # and excessive_buffer_overrun_errors (4 bits) stands at 15 on every port
    assert saturated["mlx5_1/1"] == ["excessive_buffer_overrun_errors", "link_downed"]


def test_a_counter_reset_or_a_port_gone_during_the_window_gives_no_delta() -> None:
    healthy = with_value(SYSFS, "mlx5_1/ports/1/counters/link_downed", "0")
    reset = with_value(healthy, "mlx5_0/ports/1/counters/port_rcv_errors", "0")  # 14 → 0: perfquery -R, a reload
    gone = "\n".join(line for line in healthy.splitlines() if "/mlx5_9/" not in line) + "\n"

    after_reset = fabric_metrics(ports(healthy), ports(reset))
    after_gone = fabric_metrics(ports(healthy), ports(gone))

    assert "value" not in after_reset["ib_port_rcv_errors_delta"] and "value" in after_reset["ib_link_downed_delta"]
    assert all("value" not in entry for entry in after_gone.values())
    assert after_gone["ib_link_downed_delta"]["statistics"]["mlx5_9/1"] is None
    evidence = fabric_evidence("sysfs", ports(healthy), ports(reset))
    assert next(row for row in evidence["ports"] if row["port"] == "mlx5_0/1")["reset"] == ["port_rcv_errors"]


def test_the_ports_whose_counters_grew_travel_first() -> None:
    healthy = with_value(SYSFS, "mlx5_1/ports/1/counters/link_downed", "0")
    after = with_value(healthy, "mlx5_9/ports/1/counters/symbol_error", "4")

    evidence = fabric_evidence("sysfs", ports(healthy), ports(after))

    assert evidence["source"] == "sysfs" and evidence["ports"][0]["port"] == "mlx5_9/1"
    assert evidence["ports"][0]["before"]["symbol_error"] == 0 and evidence["ports"][0]["after"]["symbol_error"] == 4
    assert [row["port"] for row in evidence["ports"][1:]] == sorted(row["port"] for row in evidence["ports"][1:])


# --- the health window ------------------------------------------------------------------------------------------


class Readings:
    """A hardware source answering each part with the next of its readings."""

    def __init__(self, **readings: list[Reading]) -> None:
        self.readings = readings

    def read(self, part: str, target: Target, **_: Any) -> Reading:
        queue = self.readings.get(part)
        if not queue:
            return Reading(None, NOT_CONFIGURED)
        return queue.pop(0) if len(queue) > 1 else queue[0]


def window_run(target: Target, **fields: Any) -> TestRun:
    return TestRun(requirement="gpu-health-window", test="health-window", parameters={}, targets=(target,), **fields)


def gpu_and_log() -> dict[str, list[Reading]]:
    xml = (FIXTURES / "nvidia_smi_q_x_r590_dual_a5000.xml").read_text()
    return {"gpu_health": [Reading(xml)], "kernel_log": [Reading("", source="journalctl")]}


def test_the_window_reports_the_growth_between_the_jobs_start_and_its_end() -> None:
    healthy = with_value(SYSFS, "mlx5_1/ports/1/counters/link_downed", "0")
    after = with_value(healthy, "mlx5_0/ports/1/counters/link_downed", "3")
    source = Readings(**gpu_and_log(), ib_counters=[Reading(healthy), Reading(after)])
    target = Target("dev-1", "a01-n01", H200)
    before = fabric_snapshot(source, target)  # type: ignore[arg-type]  # what the runner reads at the job's start

    outcome = health_window(source, window_run(target, fabric_before=before))  # type: ignore[arg-type]

    assert outcome.status == "completed", outcome.error
    assert outcome.metrics["ib_link_downed_delta"]["value"] == 3 and outcome.metrics["ib_link_flaps"]["value"] == 3
    assert outcome.health is not None and outcome.health["fabric"]["ports"][0]["port"] == "mlx5_0/1"
    assert outcome.health["fabric"]["ports"][0]["after"]["link_downed"] == 3


def test_counters_that_cannot_be_read_error_the_window_and_unconfigured_ones_are_left_out() -> None:
    target = Target("dev-1", "a01-n01", H200)
    broken = Readings(**gpu_and_log(), ib_counters=[Reading(None, "ssh: connect to host a01-n01: timed out")])
    garbled = Readings(**gpu_and_log(), ib_counters=[Reading("Permission denied\n")])
    absent = Readings(**gpu_and_log())

    for source, says in ((broken, "timed out"), (garbled, "line not understood")):
        outcome = health_window(source, window_run(target))  # type: ignore[arg-type]
        assert outcome.status == "errored" and "InfiniBand counters at the start" in (outcome.error or "")
        assert says in (outcome.error or "")
    outcome = health_window(absent, window_run(target))  # type: ignore[arg-type]
    assert outcome.status == "completed" and outcome.health is not None and "fabric" not in outcome.health
    assert "ib_link_downed_delta" not in outcome.metrics
    assert not judged(outcome.metrics)["passed"]  # a rule on a metric nobody read fails closed


@pytest.mark.parametrize("resource_class", ["gpu.h200.8x", "gpu.gb200.nvl72", "gpu.mi300x.8x"])
def test_the_simulated_fleets_links_flap_or_corrupt_symbols_only_where_told(resource_class: str) -> None:
    vendor = "amd" if "mi300x" in resource_class else "nvidia"
    healthy, flapping, noisy = (Target(f"dev-{i}", f"n0{i}", resource_class, vendor) for i in range(3))
    hardware = SimulatedHardware(parse_health_faults("n01:flap,n02:symbol"))
    results = {}
    for target in (healthy, flapping, noisy):
        before = fabric_snapshot(hardware, target)
        outcome = health_window(hardware, window_run(target, window_since=datetime.now(UTC), fabric_before=before))
        assert outcome.status == "completed", outcome.error
        results[target.hostname] = {
            name: outcome.metrics[name].get("value") for name in outcome.metrics if name.startswith("ib_")
        }
        assert before.ports is not None and all(port["counters"] for port in before.ports.values())

    assert results["n00"] == dict.fromkeys(
        ("ib_link_downed_delta", "ib_symbol_error_delta", "ib_port_rcv_errors_delta", "ib_link_flaps"), 0
    )
    assert results["n01"]["ib_link_downed_delta"] == 3 and results["n01"]["ib_link_flaps"] == 3
    assert results["n02"]["ib_symbol_error_delta"] == 1200 and results["n02"]["ib_port_rcv_errors_delta"] == 40
    assert results["n02"]["ib_link_downed_delta"] == 0


# --- the runner: the window starts at the job's start ------------------------------------------------------------


class LinkDownsDuringTests(SimulatedHardware):
    """The simulated fleet, whose first port's link goes down once during every burn-in test the job runs."""

    def __init__(self) -> None:
        super().__init__()
        self.downs = 0

    def read(self, part: str, target: Target, **kwargs: Any) -> Reading:
        reading = super().read(part, target, **kwargs)
        if part != "ib_counters" or reading.text is None:
            return reading
        return Reading(with_value(reading.text, "mlx5_0/ports/1/counters/link_downed", str(self.downs)))


def test_the_agent_reads_the_counters_at_the_jobs_start_and_reports_their_growth_over_every_test(
    tmp_path: Path,
) -> None:
    from fleet_agent.executors import SimulatedExecutor
    from tests.agent.test_hardware_collection import Service, agent_for, job

    service = Service()
    agent = agent_for(tmp_path, service)
    hardware = LinkDownsDuringTests()
    assert isinstance(agent.executor, SimulatedExecutor)
    agent.executor.hardware = hardware
    run_test = agent.executor.run

    def run_and_flap(run: TestRun, **kwargs: Any) -> Any:
        if run.test != "health-window":
            hardware.downs += 1  # the link went down while this test ran
        return run_test(run, **kwargs)

    agent.executor.run = run_and_flap  # type: ignore[method-assign]

    agent.run_job(job())

    (window,) = [body for _, body in service.reports if "health" in body]
    # two tests ran between the job's start and the window: both link-downs are in the window's delta (a window
    # that read its "before" when it ran would have seen none)
    assert window["metrics"]["ib_link_downed_delta"]["value"] == 2
    assert window["metrics"]["ib_link_downed_delta"]["statistics"]["mlx5_0/1"] == 2
    assert window["metrics"]["ib_link_flaps"]["value"] == 2
    first = window["health"]["fabric"]["ports"][0]
    assert (first["port"], first["before"]["link_downed"], first["after"]["link_downed"]) == ("mlx5_0/1", 0, 2)
