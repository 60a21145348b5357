"""The inventory sweep: the hardware of the satellite's accepted and in-service devices (the ones that run no
jobs), read with the executor's hardware source and reported in bounded batches; a device whose GPUs cannot be
read is skipped, never reported. The service side (and a real agent noticing a swap) is tested in
tests/burnin/test_fingerprint_sweep.py and tests/e2e/test_fingerprint_e2e.py."""

from __future__ import annotations

import json
import logging
import threading
from pathlib import Path
from typing import Any

import httpx
import pytest

from fleet_agent.client import FleetClient
from fleet_agent.config import AgentConfig, ConfigError, load_config
from fleet_agent.executors.base import Target
from fleet_agent.executors.hardware import collect_inventory
from fleet_agent.executors.simulated_hardware import SIMULATED_SWAPS, SimulatedHardware
from fleet_agent.inventory_sweep import inventory_sweep
from fleet_agent.runner import Agent
from fleet_agent.state import AgentState
from tests.agent.test_hardware_collection import H200

REQUIRED = {"api": "http://x", "site": "s", "satellite": "a", "client_id": "i", "client_secret": "p"}
STATES = ["staged", "burn_in", "accepted", "in_service", "needs_repair", "maintenance", "decommissioned"]


def node(index: int, state: str, resource_class: str = H200) -> dict[str, Any]:
    return {
        "device_id": f"00000000-0000-4000-8000-{index:012d}",
        "hostname": f"n{index:02d}",
        "state": state,
        "why": "",
        "since": None,
        "resource_class": resource_class,
    }


class Service:
    """A scripted transport (the pattern of test_client.py): node states in pages of two, every
    fingerprint report recorded and answered as the service does."""

    def __init__(self, nodes: list[dict[str, Any]], refuse: int | None = None) -> None:
        self.nodes = nodes
        self.posted: list[dict[str, Any]] = []
        self.refuse = refuse  # the index of the batch answered with a 400

    def __call__(self, request: httpx.Request) -> httpx.Response:
        path = request.url.path
        if path == "/o/token/":
            return httpx.Response(200, json={"access_token": "t", "expires_in": 3600})
        if path == "/api/v1/satellites/node-states/":
            start = int(request.url.params.get("cursor") or 0)
            more = start + 2 < len(self.nodes)
            return httpx.Response(
                200, json={"results": self.nodes[start : start + 2], "next_cursor": str(start + 2) if more else None}
            )
        if path == "/api/v1/satellites/fingerprints/" and request.method == "POST":
            body = json.loads(request.content)
            self.posted.append(body)
            if len(self.posted) - 1 == self.refuse:
                return httpx.Response(400, json={"detail": "no", "code": "invalid", "field_errors": []})
            results = [
                {"hostname": d["hostname"], "device_id": "x", "sha256": "0" * 64, "created": False, "superseded": None}
                for d in body["devices"]
            ]
            return httpx.Response(200, json={"results": results})
        return httpx.Response(404, json={"detail": f"unexpected {request.method} {path}"})


def client_for(service: Service) -> FleetClient:
    return FleetClient("http://fleet", "i", "c", transport=httpx.MockTransport(service), max_retries=0)


def test_only_accepted_and_in_service_devices_are_read_and_reported_in_bounded_batches() -> None:
    nodes = [node(i, state) for i, state in enumerate(STATES)] + [node(10 + i, "accepted") for i in range(3)]
    service = Service(nodes)
    hardware = SimulatedHardware()

    report = inventory_sweep(client_for(service), hardware, site="lon-1", satellite="sat-a", batch=2)

    swept = ["n02", "n03", "n10", "n11", "n12"]
    assert [[d["hostname"] for d in body["devices"]] for body in service.posted] == [swept[:2], swept[2:4], swept[4:]]
    assert all((body["site_slug"], body["satellite_name"]) == ("lon-1", "sat-a") for body in service.posted)
    by_host = {d["hostname"]: d["inventory"] for body in service.posted for d in body["devices"]}
    n03 = next(n for n in nodes if n["hostname"] == "n03")
    assert by_host["n03"] == collect_inventory(hardware, Target(n03["device_id"], "n03", H200))
    assert (report.devices, report.reported, report.skipped, report.failed_batches) == (5, 5, [], 0)


def test_a_swapped_gpu_shows_in_the_swept_inventory(tmp_path: Path) -> None:
    swaps = tmp_path / SIMULATED_SWAPS
    hardware = SimulatedHardware(swaps_file=swaps)
    service = Service([node(1, "accepted")])
    client = client_for(service)
    inventory_sweep(client, hardware, site="lon-1", satellite="sat-a")

    swaps.write_text(json.dumps({"n01": [3]}))
    inventory_sweep(client, hardware, site="lon-1", satellite="sat-a")

    before, after = (body["devices"][0]["inventory"]["gpus"] for body in service.posted)
    assert before[3]["serial"] != after[3]["serial"]
    assert before[:3] == after[:3] and before[4:] == after[4:]


def test_a_device_whose_gpus_cannot_be_read_is_logged_and_skipped_never_reported(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # The simulation has no hardware model for this resource class: nvidia-smi gives nothing
    service = Service([node(1, "accepted", "cpu.unknown"), node(2, "in_service")])

    with caplog.at_level(logging.WARNING, logger="fleet_agent.inventory_sweep"):
        report = inventory_sweep(client_for(service), SimulatedHardware(), site="lon-1", satellite="sat-a")

    assert [[d["hostname"] for d in body["devices"]] for body in service.posted] == [["n02"]]
    assert len(report.skipped) == 1 and report.skipped[0].startswith("n01: its GPUs could not be read")
    assert "n01 skipped" in caplog.text


def test_nothing_is_read_or_reported_when_no_device_is_accepted_or_in_service() -> None:
    service = Service([node(1, "burn_in"), node(2, "needs_repair")])
    report = inventory_sweep(client_for(service), SimulatedHardware(), site="lon-1", satellite="sat-a")
    assert service.posted == [] and report.devices == 0


def test_a_refused_batch_is_logged_and_the_next_batches_still_go(caplog: pytest.LogCaptureFixture) -> None:
    service = Service([node(i, "accepted") for i in range(3)], refuse=0)

    report = inventory_sweep(client_for(service), SimulatedHardware(), site="lon-1", satellite="sat-a", batch=2)

    assert [len(body["devices"]) for body in service.posted] == [2, 1]
    assert (report.failed_batches, report.reported) == (1, 1)
    assert "reporting 2 device(s) failed" in caplog.text


def test_an_executor_that_reads_no_hardware_sweeps_nothing_and_says_so(caplog: pytest.LogCaptureFixture) -> None:
    service = Service([node(1, "accepted")])
    with caplog.at_level(logging.INFO, logger="fleet_agent.inventory_sweep"):
        report = inventory_sweep(client_for(service), None, site="lon-1", satellite="sat-a")
    assert service.posted == [] and report.devices == 0
    assert "reads no hardware" in caplog.text


def test_the_agent_sweeps_with_its_executors_hardware_unless_report_hardware_is_off(tmp_path: Path) -> None:
    from fleet_agent.executors import SimulatedExecutor

    for report_hardware, posts in ((True, 1), (False, 0)):
        service = Service([node(1, "accepted")])
        settings = AgentConfig(**REQUIRED, state_dir=str(tmp_path / "state"), report_hardware=report_hardware)
        agent = Agent(settings, client_for(service), SimulatedExecutor(seed=1), AgentState(settings.state_dir))
        agent.sweep_inventory()
        assert len(service.posted) == posts


def test_the_slurm_executor_reads_hardware_in_jobs_but_is_not_swept(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """An in-service node runs production jobs: a sweep step would queue behind them."""
    from fleet_agent.executors.slurm import SlurmExecutor, SlurmSettings

    executor = SlurmExecutor(
        {"t": {"template": "true", "parser": "dcgm-diag-json"}},
        SlurmSettings(output_dir=str(tmp_path / "slurm")),
        hardware_commands={"nvidia_smi": "nvidia-smi -q -x"},
    )
    service = Service([node(1, "accepted"), node(2, "in_service")])
    settings = AgentConfig(**REQUIRED, state_dir=str(tmp_path / "state"))
    agent = Agent(settings, client_for(service), executor, AgentState(settings.state_dir))
    with caplog.at_level(logging.INFO, logger="fleet_agent"):
        report = agent.sweep_inventory()
    assert executor.hardware is not None and service.posted == [] and report.devices == 0
    assert "the slurm executor reads hardware in burn-in jobs only; nothing swept" in caplog.text


def test_inventory_interval_defaults_to_an_hour_zero_is_off_and_a_negative_one_is_refused() -> None:
    assert load_config(REQUIRED, environ={}).inventory_interval == 3600
    assert load_config(REQUIRED | {"inventory_interval": 0}, environ={}).inventory_interval == 0
    assert load_config(REQUIRED, environ={"FLEET_AGENT_INVENTORY_INTERVAL": "5"}).inventory_interval == 5
    with pytest.raises(ConfigError, match="inventory_interval"):
        load_config(REQUIRED | {"inventory_interval": -1}, environ={})


class _Held:
    """A hardware source that waits to be let go: a sweep that takes long."""

    def __init__(self) -> None:
        self.go = threading.Event()
        self.reads = 0
        self.inner = SimulatedHardware()

    def read(self, part: str, target: Target, **kwargs: Any) -> Any:
        self.reads += 1
        assert self.go.wait(60)
        return self.inner.read(part, target, **kwargs)


def test_the_daemons_sweep_runs_on_its_own_thread_and_a_tick_while_it_runs_starts_no_other(tmp_path: Path) -> None:
    from concurrent.futures import Future, ThreadPoolExecutor

    from fleet_agent.executors import SimulatedExecutor

    service = Service([node(1, "accepted")])
    settings = AgentConfig(**REQUIRED, state_dir=str(tmp_path / "state"))
    executor = SimulatedExecutor(seed=1)
    held = _Held()
    executor.hardware = held  # type: ignore[assignment]
    agent = Agent(settings, client_for(service), executor, AgentState(settings.state_dir))
    sweeping: set[Future[Any]] = set()
    with ThreadPoolExecutor(max_workers=1) as sweeper:
        agent._sweep_aside(sweeper, sweeping)  # returns at once: the sweep waits on its thread
        (first,) = sweeping
        agent._sweep_aside(sweeper, sweeping)  # still running: no second sweep
        assert sweeping == {first} and service.posted == []
        held.go.set()
        first.result(timeout=60)
        agent._sweep_aside(sweeper, sweeping)  # done: the next tick starts the next sweep
        (second,) = sweeping
        second.result(timeout=60)
    assert second is not first and len(service.posted) == 2
