"""Reading a device's hardware around a job: the inventory on every single-device report, the health window
run last and judged by the example thresholds; the simulated fleet has exactly the parsers' shapes and its
fault knobs (a swapped GPU, a fatal Xid, ECC growth, a pending remap, HW slowdown) show where they should."""

from __future__ import annotations

import json
import stat
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest

from fleet_agent.client import FleetClient
from fleet_agent.config import AgentConfig, ConfigError, load_config
from fleet_agent.executors import CommandExecutor, SimulatedExecutor, Target, TestRun
from fleet_agent.executors.hardware import (
    HEALTH_WINDOW_TEST,
    MAX_XID_EVENTS,
    HealthSnapshot,
    Reading,
    collect_inventory,
    health_snapshot,
    health_window,
)
from fleet_agent.executors.simulated_hardware import SIMULATED_SWAPS, SimulatedHardware, parse_health_faults
from fleet_agent.parsers.nvidia_smi_xml import parse_health
from fleet_agent.runner import Agent, execution_id_for, ordered_requirements
from fleet_agent.state import AgentState
from fleet_rules.evaluator import evaluate

FIXTURES = Path(__file__).parent / "fixtures"
H200, GB200 = "gpu.h200.8x", "gpu.gb200.nvl72"
WINDOW_RULES = [
    {"metric": "xid_fatal_count", "statistic": None, "comparator": "eq", "threshold": 0},
    {"metric": "row_remap_pending", "statistic": None, "comparator": "eq", "threshold": 0},
    {"metric": "ecc_uncorrected_delta", "statistic": None, "comparator": "eq", "threshold": 0},
    {"metric": "hw_slowdown_seen", "statistic": None, "comparator": "eq", "threshold": 0},
]
INVENTORY_KEYS = {"driver_version", "cuda_version", "gpus", "hcas", "host", "missing"}
GPU_KEYS = {"uuid", "serial", "pci_bus_id", "vbios_version", "part_number", "product_name"}


def window_run(target: Target, **extra: Any) -> TestRun:
    return TestRun(requirement="gpu-health-window", test=HEALTH_WINDOW_TEST, parameters={}, targets=(target,), **extra)


def judged(outcome: Any) -> dict[str, Any]:
    plain = json.loads(json.dumps(outcome.metrics, allow_nan=False))
    return evaluate(status=outcome.status, metrics=plain, rules=WINDOW_RULES, error=outcome.error)


# --- the simulated fleet ------------------------------------------------------------------------


@pytest.mark.parametrize(("resource_class", "gpus", "hcas"), [(H200, 8, 8), (GB200, 4, 4)])
def test_a_simulated_inventory_has_the_wire_shape_and_is_stable(resource_class: str, gpus: int, hcas: int) -> None:
    hardware = SimulatedHardware()
    target = Target("dev-1", "a01-n01", resource_class)

    inventory = collect_inventory(hardware, target)

    assert set(inventory) == INVENTORY_KEYS and inventory["missing"] == []
    assert len(inventory["gpus"]) == gpus and all(set(gpu) == GPU_KEYS for gpu in inventory["gpus"])
    assert all(gpu["serial"] and gpu["uuid"].startswith("GPU-") for gpu in inventory["gpus"])
    assert len({gpu["serial"] for gpu in inventory["gpus"]}) == gpus
    assert [set(hca) for hca in inventory["hcas"]] == [{"name", "firmware_version", "node_guid", "ports"}] * hcas
    assert inventory["hcas"][0]["ports"] == [{"port": 1, "state": "Active", "rate_gbps": 400}]
    assert set(inventory["host"]) == {"bios_version", "system_serial"} and all(inventory["host"].values())
    assert collect_inventory(SimulatedHardware(), target) == inventory  # identity does not depend on anything else
    assert collect_inventory(hardware, Target("dev-2", "a01-n02", resource_class))["gpus"] != inventory["gpus"]


def test_simulated_health_has_exactly_the_parsers_shape() -> None:
    simulated = health_snapshot(SimulatedHardware(), Target("dev-1", "a01-n01", H200))
    real = parse_health((FIXTURES / "nvidia_smi_q_x_r590_dual_a5000.xml").read_text())

    assert simulated.metrics is not None and simulated.problem is None
    assert set(simulated.metrics) == set(real)
    for name, entry in simulated.metrics.items():
        assert set(entry) <= {"value", "statistics"} and set(real[name]) <= {"value", "statistics"}
    assert simulated.metrics["row_remap_pending"]["value"] == 0
    assert len(simulated.metrics["row_remap_pending"]["statistics"]) == 8


def test_a_swapped_gpu_changes_only_that_gpus_serial_and_uuid(tmp_path: Path) -> None:
    swaps = tmp_path / SIMULATED_SWAPS
    hardware = SimulatedHardware(swaps_file=swaps)
    target = Target("dev-1", "a01-n01", H200)
    before = collect_inventory(hardware, target)

    swaps.write_text(json.dumps({"a01-n01": [3]}))
    after = collect_inventory(hardware, target)
    swaps.write_text(json.dumps({"dev-1": [3, 3]}))  # swapped a second time: yet another board
    again = collect_inventory(hardware, target)

    changed = [i for i, (a, b) in enumerate(zip(before["gpus"], after["gpus"], strict=True)) if a != b]
    assert changed == [3]
    assert after["gpus"][3]["serial"] != before["gpus"][3]["serial"]
    assert after["gpus"][3]["uuid"] != before["gpus"][3]["uuid"]
    assert after["gpus"][3]["pci_bus_id"] == before["gpus"][3]["pci_bus_id"]  # same slot
    assert again["gpus"][3]["serial"] not in {before["gpus"][3]["serial"], after["gpus"][3]["serial"]}
    swaps.write_text("{half-written")
    assert collect_inventory(hardware, target) == before  # an unreadable log swaps nothing


def test_a_healthy_simulated_device_passes_its_health_window() -> None:
    executor = SimulatedExecutor(seed=1, faulty_share=1.0, transient_share=0.0)  # burn-in faults do not show here
    target = Target("dev-1", "a01-n01", H200)

    outcome = executor.run(window_run(target), attempt=1)

    assert outcome.status == "completed", outcome.error
    assert judged(outcome)["passed"], judged(outcome)["reason"]
    assert outcome.health is not None and outcome.health["xid_events"] == []
    assert outcome.health["source"] == "simulated" and outcome.health["throttle_reasons_seen"] == []


@pytest.mark.parametrize(
    ("fault", "failing_metric", "expected"),
    [
        ("xid", "xid_fatal_count", 1),
        ("xid=48", "xid_fatal_count", 1),
        ("ecc", "ecc_uncorrected_delta", 2),
        ("remap", "row_remap_pending", 1),
        ("slowdown", "hw_slowdown_seen", 1),
    ],
)
def test_each_health_fault_fails_the_window_on_its_metric_only(fault: str, failing_metric: str, expected: int) -> None:
    executor = SimulatedExecutor(seed=1, faulty_share=0.0, health_faults=parse_health_faults(f"a01-n02:{fault}"))
    since = datetime.now(UTC) - timedelta(minutes=30)
    target = Target("dev-2", "a01-n02", H200)
    before = health_snapshot(executor.hardware, target, "before")

    outcome = executor.run(window_run(target, window_since=since, health_before=before), attempt=1)

    assert outcome.status == "completed"
    verdict = judged(outcome)
    assert not verdict["passed"]
    failed = {m for m, result in verdict["metric_evaluations"].items() if not result["passed"]}
    assert failed == {failing_metric}
    assert outcome.metrics[failing_metric]["value"] == expected
    assert outcome.health is not None
    assert outcome.health["window"]["since"] == since.isoformat().replace("+00:00", "Z")
    if fault.startswith("xid"):
        (event,) = outcome.health["xid_events"]
        assert event["kind"] == "xid" and event["code"] == (48 if "48" in fault else 79)
        assert event["pci_bus_id"] == "0000:19:00" and event["at"] is not None
    if fault == "slowdown":
        assert outcome.health["throttle_reasons_seen"] == ["hw_slowdown"]
    if fault == "ecc":
        assert outcome.health["ecc"]["before"]["ecc_uncorrected_aggregate"] == 0
        assert outcome.health["ecc"]["after"]["ecc_uncorrected_aggregate"] == 2


def test_health_faults_are_checked_when_the_configuration_loads() -> None:
    with pytest.raises(ConfigError, match="health_faults: 'a01-n01:fire' is not"):
        load_config({"api": "http://x", "site": "s", "satellite": "t", "client_id": "i", "client_secret": "c",
                     "health_faults": "a01-n01:fire"}, environ={})  # fmt: skip
    with pytest.raises(ConfigError, match="only xid, transient and crash take a code"):
        load_config({"api": "http://x", "site": "s", "satellite": "t", "client_id": "i", "client_secret": "c",
                     "health_faults": "a01-n01:ecc=3"}, environ={})  # fmt: skip


# --- the health window's refusals ---------------------------------------------------------------


class Broken:
    """A hardware source whose parts answer with fixed readings."""

    def __init__(self, **readings: Reading) -> None:
        self.readings = readings
        self.reads: list[str] = []

    def read(self, part: str, target: Target, **_: Any) -> Reading:
        self.reads.append(part)
        return self.readings.get(part, Reading(None, "not configured"))


def test_a_window_whose_kernel_log_or_counters_cannot_be_read_is_errored_never_passed() -> None:
    xml = (FIXTURES / "nvidia_smi_q_x_r590_dual_a5000.xml").read_text()
    target = Target("dev-1", "a01-n01", H200)
    cases = [
        (Broken(gpu_health=Reading(xml)), "the kernel log could not be read: not configured"),
        (
            Broken(
                gpu_health=Reading(xml),
                kernel_log=Reading((FIXTURES / "kernel_log_sxid_unreadable_code.log").read_text()),
            ),
            "sxid whose code cannot be read",
        ),
        (
            Broken(gpu_health=Reading((FIXTURES / "nvidia_smi_q_x_r590_dual_a5000_truncated.xml").read_text())),
            "the health snapshot at the start of the window could not be read: nvidia-smi: nvidia-smi XML is malformed",
        ),
    ]
    for source, error in cases:
        outcome = health_window(source, window_run(target))  # type: ignore[arg-type]
        assert outcome.status == "errored" and error in (outcome.error or ""), outcome.error
        assert outcome.health is None and outcome.metrics == {}


def test_a_gpu_missing_after_the_window_gives_no_ecc_delta() -> None:
    two = (FIXTURES / "nvidia_smi_q_x_r590_dual_a5000.xml").read_text()
    text = two.replace("<dram_uncorrectable>N/A</dram_uncorrectable>", "<dram_uncorrectable>0</dram_uncorrectable>")
    text = text.replace("<sram_uncorrectable_parity>N/A<", "<sram_uncorrectable_parity>0<")
    text = text.replace("<sram_uncorrectable_secded>N/A<", "<sram_uncorrectable_secded>0<")
    one = text[: text.index('<gpu id="00000000:C1:00.0">')] + "</nvidia_smi_log>\n"
    before = HealthSnapshot(datetime.now(UTC), parse_health(text))
    source = Broken(gpu_health=Reading(one), kernel_log=Reading("", source="journalctl"))

    outcome = health_window(source, window_run(Target("d", "h", H200), health_before=before))  # type: ignore[arg-type]

    assert before.metrics is not None and before.metrics["ecc_uncorrected_aggregate"]["value"] == 0
    assert outcome.metrics["ecc_uncorrected_delta"] == {"statistics": {"00000000:81:00.0": 0}}
    assert not judged(outcome)["passed"]  # a vanished GPU is not a zero delta


def test_the_events_carried_are_bounded_but_the_counts_are_complete() -> None:
    xml = (FIXTURES / "nvidia_smi_q_x_r590_dual_a5000.xml").read_text()
    line = "NVRM: Xid (PCI:0000:81:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus.\n"
    source = Broken(gpu_health=Reading(xml), kernel_log=Reading(line * (MAX_XID_EVENTS + 50), source="dmesg"))

    outcome = health_window(source, window_run(Target("d", "h", H200)))  # type: ignore[arg-type]

    assert outcome.metrics["xid_fatal_count"]["value"] == MAX_XID_EVENTS + 50
    assert outcome.health is not None and len(outcome.health["xid_events"]) == MAX_XID_EVENTS
    assert outcome.health["source"] == "dmesg"


# --- the command executor -----------------------------------------------------------------------


def script(path: Path, body: str) -> str:
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(path.stat().st_mode | stat.S_IEXEC)
    return str(path)


@pytest.mark.process
def test_the_command_executor_reads_real_outputs_and_falls_back_to_dmesg(tmp_path: Path) -> None:
    (tmp_path / "dmi").mkdir()
    (tmp_path / "dmi" / "bios_version").write_text("2.17.0\n")
    (tmp_path / "dmi" / "product_serial").write_text("Default string\n")
    journalctl = script(tmp_path / "journalctl", 'echo "No journal files were found." >&2\nexit 1\n')
    dmesg = script(
        tmp_path / "dmesg",
        f"cat {FIXTURES / 'kernel_log_dmesg_decode_iso_xid13_43.log'}\necho\n"  # from 2025: outside the window
        "echo \"$(date -u -d '-1 min' +%Y-%m-%dT%H:%M:%S,%6N+00:00) NVRM: Xid (PCI:0000:81:00): 79, pid='<unknown>', "
        'name=<unknown>, GPU has fallen off the bus."\n',
    )
    executor = CommandExecutor(
        {"dcgm-diag": {"template": "true", "parser": "dcgm-diag-json"}},
        hardware_commands={
            "nvidia_smi": f"cat {FIXTURES / 'nvidia_smi_q_x_r590_dual_a5000.xml'}",
            "ibstat": {"template": f"cat {FIXTURES / 'ibstat_h100_some_down.txt'}", "timeout": 10},
            "dmi": f"grep -H . {tmp_path}/dmi/bios_version {tmp_path}/dmi/product_serial",
            "kernel_log": f"{journalctl} -k --since @{{since_epoch}} --until @{{until_epoch}}",
            "kernel_log_fallback": f"{dmesg} --time-format iso",
        },
    )
    target = Target("dev-1", "a01-n01", H200)

    inventory = collect_inventory(executor.hardware, target)
    outcome = executor.run(window_run(target, window_since=datetime.now(UTC) - timedelta(minutes=5)), attempt=1)

    assert inventory["driver_version"] == "590.44.01" and len(inventory["gpus"]) == 2
    assert len(inventory["hcas"]) == 12
    assert inventory["host"] == {"bios_version": "2.17.0", "system_serial": None}
    assert inventory["missing"] == ["dmi: product_serial: a placeholder, not a value ('Default string')"]
    assert outcome.status == "completed", outcome.error
    assert outcome.health is not None and outcome.health["source"] == "dmesg"
    assert [event["code"] for event in outcome.health["xid_events"]] == [79]  # the 2025 lines are outside the window
    assert outcome.metrics["xid_fatal_count"]["value"] == 1


@pytest.mark.process
@pytest.mark.parametrize(("journal_works", "source"), [(True, "journalctl"), (False, "dmesg")])
def test_a_kernel_log_read_by_a_site_s_wrapper_names_the_tool_its_key_stands_for(
    tmp_path: Path, journal_works: bool, source: str
) -> None:
    """`health.source` is journalctl or dmesg (the service refuses anything else): a wrapper script's name is
    neither, so the key that answered says which (before: the script's name, and every report a 400)."""
    log = f"cat {FIXTURES / 'kernel_log_journalctl_short_iso_no_xid.log'}\n"
    journal = script(tmp_path / "read-journal", log if journal_works else "exit 1\n")
    ring = script(tmp_path / "read-ring", log)
    executor = CommandExecutor(
        {"dcgm-diag": {"template": "true", "parser": "dcgm-diag-json"}},
        hardware_commands={
            "nvidia_smi": f"cat {FIXTURES / 'nvidia_smi_q_x_r590_dual_a5000.xml'}",
            "kernel_log": str(journal),
            "kernel_log_fallback": str(ring),
        },
    )

    outcome = executor.run(window_run(Target("dev-1", "a01-n01", H200)), attempt=1)

    assert outcome.status == "completed", outcome.error
    assert outcome.health is not None and outcome.health["source"] == source


@pytest.mark.process
def test_unconfigured_or_failing_hardware_commands_are_reported_missing_never_invented() -> None:
    executor = CommandExecutor(
        {"dcgm-diag": {"template": "true", "parser": "dcgm-diag-json"}},
        hardware_commands={"nvidia_smi": "false", "ibstat": "no-such-ibstat-binary"},
    )
    target = Target("dev-1", "a01-n01", H200)

    inventory = collect_inventory(executor.hardware, target)
    outcome = executor.run(window_run(target), attempt=1)

    assert inventory == {
        "driver_version": None,
        "cuda_version": None,
        "gpus": [],
        "hcas": [],
        "host": {"bios_version": None, "system_serial": None},
        "missing": [
            "nvidia-smi: false exited with status 1",
            "ibstat: command not found: no-such-ibstat-binary",
            "dmi: no command configured (hardware_commands.dmi)",
        ],
    }
    assert outcome.status == "errored" and "nvidia-smi: false exited with status 1" in (outcome.error or "")


@pytest.mark.parametrize(
    ("commands", "message"),
    [
        ({"nvidia-smi": "nvidia-smi -q -x"}, "hardware_commands.nvidia-smi: unknown part"),
        ({"ibstat": {"template": "ibstat", "timeout": 0}}, "ibstat.timeout: must be a positive number"),
        ({"dmi": {"command": "x"}}, "hardware_commands.dmi: a command template"),
        ({"kernel_log": "journalctl 'unclosed"}, "hardware_commands.kernel_log: cannot be split"),
    ],
)
def test_a_wrong_hardware_command_stops_the_agent_at_start(commands: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        CommandExecutor({"dcgm-diag": {"template": "true", "parser": "dcgm-diag-json"}}, hardware_commands=commands)


# --- the runner ---------------------------------------------------------------------------------


class Service:
    """A scripted transport (the pattern of test_client.py): every report is accepted and recorded."""

    def __init__(self) -> None:
        self.reports: list[tuple[str, dict[str, Any]]] = []
        self.finished: list[dict[str, Any]] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        path = request.url.path
        if path == "/o/token/":
            return httpx.Response(200, json={"access_token": "t", "expires_in": 3600})
        if path.startswith("/api/v1/burn-in/executions/") and request.method == "PUT":
            self.reports.append((path.split("/")[-2], json.loads(request.content)))
            return httpx.Response(200, json={"status": "ok"})
        if path.endswith("/finish/"):
            self.finished.append(json.loads(request.content))
            return httpx.Response(200, json={"status": "succeeded"})
        return httpx.Response(404, json={"detail": f"unexpected {request.method} {path}"})


def job(workflow: str = "SingleNodeBurnInWorkflow") -> dict[str, Any]:
    now = datetime.now(UTC)
    return {
        "id": "7f8e0d6e-3c1b-4d59-a3c4-0b7d1c2f9a10",
        "workflow_name": workflow,
        "devices": [{"id": "4d2c1f3e-1111-4a2b-9c3d-000000000001", "hostname": "a01-n02", "resource_class": H200}],
        "topology": {"id": "5e3d2f4a-2222-4b3c-8d4e-000000000002", "label": "rack-a01"},
        "claimed_at": now.isoformat(),
        "lease_expires_at": (now + timedelta(minutes=10)).isoformat(),
        "parameters": {
            "requirements": [
                {"name": "gpu-health-window", "test": HEALTH_WINDOW_TEST, "parameters": {}},
                {"name": "gpu-diag", "test": "dcgm-diag", "parameters": {"level": 3}},
                {"name": "hbm-bandwidth", "test": "hbm-bandwidth", "parameters": {"duration_s": 120}},
            ]
        },
    }


def agent_for(tmp_path: Path, service: Service, **config: Any) -> Agent:
    settings = AgentConfig(api="http://fleet", site="lon-1", satellite="sat-a", client_id="i", client_secret="c",
                           state_dir=str(tmp_path / "state"), **config)  # fmt: skip
    client = FleetClient("http://fleet", "i", "c", transport=httpx.MockTransport(service), max_retries=0)
    executor = SimulatedExecutor(seed=1, faulty_share=0.0, health_faults=parse_health_faults("a01-n02:xid"))
    return Agent(settings, client, executor, AgentState(settings.state_dir))


def test_the_health_window_runs_last_and_every_report_carries_the_inventory(tmp_path: Path) -> None:
    service = Service()

    agent_for(tmp_path, service).run_job(job())

    order = [body["requirement"] for _, body in service.reports if body["status"] != "running"]
    assert order == ["gpu-diag", "hbm-bandwidth", "gpu-health-window"]
    inventories = [body["inventory"] for _, body in service.reports]
    assert len(inventories) == 6 and all(inventory == inventories[0] for inventory in inventories)
    assert set(inventories[0]) == INVENTORY_KEYS and len(inventories[0]["gpus"]) == 8
    with_health = [body for _, body in service.reports if "health" in body]
    assert [body["requirement"] for body in with_health] == ["gpu-health-window"]
    (window,) = with_health
    assert window["status"] == "completed" and window["metrics"]["xid_fatal_count"]["value"] == 1
    assert [event["code"] for event in window["health"]["xid_events"]] == [79]
    first_start = min(body["started_at"] for _, body in service.reports)
    assert window["health"]["window"]["since"] <= first_start  # the window covers the whole job
    assert window["health"]["window"]["until"] >= max(
        b["finished_at"] for _, b in service.reports if "finished_at" in b and b["requirement"] != "gpu-health-window"
    )
    expected_id = execution_id_for(job()["id"], "gpu-health-window", job()["devices"][0]["id"])
    assert service.reports[-1][0] == expected_id
    assert service.finished == [{"status": "succeeded", "reason": ""}]


def test_without_report_hardware_nothing_hardware_is_sent_but_the_window_is_still_judged(tmp_path: Path) -> None:
    service = Service()

    agent_for(tmp_path, service, report_hardware=False).run_job(job())

    assert not any("inventory" in body or "health" in body for _, body in service.reports)
    window = service.reports[-1][1]
    assert window["requirement"] == "gpu-health-window" and window["metrics"]["xid_fatal_count"]["value"] == 1


def test_a_multi_node_job_reports_no_inventory(tmp_path: Path) -> None:
    service = Service()
    collective = job("MultiNodeBurnInCollectiveWorkflow")
    collective["parameters"]["requirements"] = [
        {"name": "rack-nccl", "test": "nccl-all-reduce-multinode", "parameters": {}}
    ]

    agent_for(tmp_path, service).run_job(collective)

    assert service.reports and not any("inventory" in body for _, body in service.reports)


def test_ordering_keeps_the_jobs_order_apart_from_the_window() -> None:
    requirements = [{"test": t} for t in ("a", HEALTH_WINDOW_TEST, "b", "c")]

    assert [r["test"] for r in ordered_requirements(requirements)] == ["a", "b", "c", HEALTH_WINDOW_TEST]


@pytest.mark.process
def test_a_truncated_nvidia_smi_names_the_missing_part_and_errors_the_window_not_the_job_run(tmp_path: Path) -> None:
    service = Service()
    settings = AgentConfig(api="http://fleet", site="lon-1", satellite="sat-a", client_id="i", client_secret="c",
                           state_dir=str(tmp_path / "state"))  # fmt: skip
    client = FleetClient("http://fleet", "i", "c", transport=httpx.MockTransport(service), max_retries=0)
    executor = CommandExecutor(
        {
            "dcgm-diag": {
                "template": f"cat {FIXTURES / 'dcgm_diag_r3_h200_pass_dcgm3.json'}",
                "parser": "dcgm-diag-json",
            }
        },
        hardware_commands={
            "nvidia_smi": f"cat {FIXTURES / 'nvidia_smi_q_x_r590_dual_a5000_truncated.xml'}",
            "ibstat": f"cat {FIXTURES / 'ibstat_h100_all_active.txt'}",
            "kernel_log": "true",
        },
    )
    claimed = job()
    claimed["parameters"]["requirements"] = claimed["parameters"]["requirements"][:2]

    Agent(settings, client, executor, AgentState(settings.state_dir)).run_job(claimed)

    finals = {body["requirement"]: body for _, body in service.reports if body["status"] != "running"}
    inventory = finals["gpu-diag"]["inventory"]
    assert inventory["gpus"] == [] and inventory["driver_version"] is None
    assert inventory["missing"][0].startswith("nvidia-smi: nvidia-smi XML is malformed or truncated")
    assert len(inventory["hcas"]) == 12  # the parts that could be read are still reported
    assert finals["gpu-diag"]["status"] == "completed"
    assert finals["gpu-health-window"]["status"] == "errored"
    assert "the health snapshot at the start of the window could not be read" in finals["gpu-health-window"]["error"]
    assert "health" not in finals["gpu-health-window"]
    assert service.finished == [{"status": "failed", "reason": "an execution errored"}]


def test_a_fatal_event_after_many_others_still_travels() -> None:
    """The service moves a device on the fatal events it receives: bounding the list must not drop one
    logged after `MAX_XID_EVENTS` application errors."""
    xml = (FIXTURES / "nvidia_smi_q_x_r590_dual_a5000.xml").read_text()
    noise = "NVRM: Xid (PCI:0000:81:00): 13, pid=1234, name=python, Graphics Exception: ESR 0x50\n"
    fatal = "NVRM: Xid (PCI:0000:81:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus.\n"
    log = Reading(noise * (MAX_XID_EVENTS + 50) + fatal, source="dmesg")
    source = Broken(gpu_health=Reading(xml), kernel_log=log)

    outcome = health_window(source, window_run(Target("d", "h", H200)))  # type: ignore[arg-type]

    assert outcome.health is not None and len(outcome.health["xid_events"]) == MAX_XID_EVENTS
    assert outcome.health["xid_events"][0]["code"] == 79
    assert [e["code"] for e in outcome.health["xid_events"][1:]] == [13] * (MAX_XID_EVENTS - 1)
