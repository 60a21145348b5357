"""The Slurm node gate against a real Slurm: real `fleet serve` and `fleet-agent gate` processes, the private
cluster's fake nodes n1..n4 standing for a01-n01..a01-n04. Each test leaves the cluster as it found it (no
drain, no reservation), for the other Slurm tests."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from fleet.burnin.models import TestExecution
from fleet.inventory.models import Device
from fleet.lifecycle.services import device_transition
from fleet_agent import metrics
from fleet_agent.client import FleetClient
from fleet_agent.executors.base import Target, TestRun
from fleet_agent.executors.slurm import SlurmExecutor, SlurmSettings
from fleet_agent.node_gate import SlurmGate, gate_sweep
from fleet_rules.vocabulary import DeviceState, Mover, TransitionCause
from tests.slurm.conftest import Slurm
from tests.support.stack import Stack, log_lines

NODES = ("n1", "n2", "n3", "n4")
HOSTS = {f"a01-n0{i}": f"n{i}" for i in range(1, 5)}
WHY = "gpu-diag failed 3 times under the current policy version (repair_after_failures 3)"
DRAIN_REASON = f"fleet-burnin: needs repair: {WHY}"
DCGM_PASS = "dcgm_diag_r3_h200_pass_dcgm3.json"


@pytest.fixture
def clean(slurm: Slurm) -> Iterator[Slurm]:
    """The cluster as the other Slurm tests expect it, before and after: every node resumed, no reservation."""
    _reset(slurm)
    yield slurm
    _reset(slurm)


def _reset(slurm: Slurm) -> None:
    for reservation in ("fleet-burnin", "ops-maint"):
        slurm.command("scontrol", "delete", f"ReservationName={reservation}")
    for node in NODES:
        if node_field(slurm, node, "Reason"):
            slurm.command("scontrol", "update", f"NodeName={node}", "State=RESUME")
    deadline = time.monotonic() + 30
    while any(state(slurm, n) != "IDLE" for n in NODES):
        assert time.monotonic() < deadline, {n: node_field(slurm, n, "State") for n in NODES}
        time.sleep(0.2)


def node_field(slurm: Slurm, node: str, name: str) -> str:
    """One field of `scontrol show node -o` (the reason without Slurm's `[user@time]`)."""
    line = slurm.command("scontrol", "show", "node", "-o", node).stdout
    if name == "Reason":
        _, found, rest = line.partition(" Reason=")
        return rest.rsplit(" [", 1)[0].strip() if found else ""
    return next((t.split("=", 1)[1] for t in line.split() if t.startswith(f"{name}=")), "")


def state(slurm: Slurm, node: str) -> str:
    """The node's state without the flags the gate does not set: RESERVED (slurmctld sets it a little after
    the node joins a reservation) and NOT_RESPONDING (a slurmd slow to answer on a loaded machine)."""
    flags = node_field(slurm, node, "State").split("+")
    return "+".join(f for f in flags if f not in ("RESERVED", "NOT_RESPONDING"))


def reservation_nodes(slurm: Slurm, name: str = "fleet-burnin") -> list[str]:
    shown = slurm.command("scontrol", "show", "reservation", "-o", name)
    if shown.returncode != 0:
        return []
    expression = next(t.split("=", 1)[1] for t in shown.stdout.split() if t.startswith("Nodes="))
    return slurm.command("scontrol", "show", "hostnames", expression).stdout.split()


def snapshot(slurm: Slurm) -> dict[str, object]:
    """What the gate may change: each node's state and reason, and the reservation's nodes."""
    nodes = {n: (state(slurm, n), node_field(slurm, n, "Reason")) for n in NODES}
    return {"nodes": nodes, "fleet-burnin": reservation_nodes(slurm)}


def gate_config(slurm: Slurm, tmp_path: Path) -> str:
    path = tmp_path / "agent-gate.yaml"
    path.write_text(
        yaml.safe_dump(
            {
                "executor": "slurm",
                "node_gate": True,
                "commands": {"dcgm-diag": {"template": slurm.replay(DCGM_PASS), "parser": "dcgm-diag-json"}},
                "slurm_node_names": HOSTS,
                "slurm_output_dir": str(tmp_path / "slurm-out"),
            }
        )
    )
    return str(path)


def device(hostname: str) -> Device:
    return Device.objects.get(hostname=hostname)


def move(hostname: str, to: DeviceState, *, cause: TransitionCause | None = None, reason: str = "test") -> None:
    mover = Mover.SYSTEM if cause is not None else Mover.OPERATOR
    force = to in (DeviceState.ACCEPTED, DeviceState.IN_SERVICE)
    device_transition(
        device_id=device(hostname).id, to=to, mover=mover, actor="user:test", reason=reason, cause=cause, force=force
    )


def test_the_gate_drains_holds_and_releases_by_lifecycle_state_and_leaves_others_drains_alone(
    clean: Slurm, stack: Stack, tmp_path: Path
) -> None:
    slurm = clean
    # a01-n01 failed too often; a01-n02 is in burn-in on a node an operator drained; a01-n03 was accepted;
    # a01-n04 is in service on a node an operator drained for a firmware update.
    move("a01-n01", DeviceState.NEEDS_REPAIR, cause=TransitionCause.FAILED_TOO_OFTEN, reason=WHY)
    slurm.command("scontrol", "update", "NodeName=n2", "State=DRAIN", "Reason=ops: bad fan, ticket 4411")
    move("a01-n03", DeviceState.ACCEPTED)
    move("a01-n04", DeviceState.ACCEPTED)
    move("a01-n04", DeviceState.IN_SERVICE)
    slurm.command("scontrol", "update", "NodeName=n4", "State=DRAIN", "Reason=ops: firmware update")
    config = gate_config(slurm, tmp_path)
    before = snapshot(slurm)

    # --dry-run prints what it would do and changes nothing
    dry = stack.agent("gate", "--config", config, "--dry-run", **slurm.env)

    assert snapshot(slurm) == before
    printed = dry.stdout.splitlines()
    assert f'would drain n1 (a01-n01: needs_repair) reason="{DRAIN_REASON}"' in printed
    assert [line for line in printed if line.startswith("would hold")] == [
        "would hold n1 (a01-n01: needs_repair)",
        "would hold n2 (a01-n02: burn_in)",
        "would hold n3 (a01-n03: accepted)",
    ]
    assert "left n4 (a01-n04: in_service) alone, foreign_reason: ops: firmware update" in printed
    assert "left n2 (a01-n02: burn_in) alone, foreign_reason: ops: bad fan, ticket 4411" in printed

    # the sweep: n1 drained with the reason; n1-n3 held in the reservation; the operators' drains untouched
    applied = stack.agent("gate", "--config", config, **slurm.env)

    assert node_field(slurm, "n1", "Reason") == DRAIN_REASON
    assert "DRAIN" in state(slurm, "n1")
    assert reservation_nodes(slurm) == ["n1", "n2", "n3"]
    assert "DRAIN" not in state(slurm, "n3")  # held, not drained: burn-in may run there
    assert node_field(slurm, "n2", "Reason") == "ops: bad fan, ticket 4411"
    assert node_field(slurm, "n4", "Reason") == "ops: firmware update"
    assert "DRAIN" in state(slurm, "n4")
    logged = [line["message"] for line in log_lines(applied)]
    assert f'node gate: drain n1 (a01-n01: needs_repair) reason="{DRAIN_REASON}"' in logged
    after_first = snapshot(slurm)

    # a restarted agent (a new process) finds everything right and changes nothing
    again = stack.agent("gate", "--config", config, **slurm.env)

    assert snapshot(slurm) == after_first
    assert not [line for line in again.stdout.splitlines() if line.split()[0] in ("drain", "resume", "hold", "release")]

    # a01-n03 goes into service; a01-n01 is repaired (back to burn-in); the operator's n4 drain stays theirs
    move("a01-n03", DeviceState.IN_SERVICE)
    move("a01-n01", DeviceState.BURN_IN, cause=TransitionCause.REPAIR)

    resumed = stack.agent("gate", "--config", config, **slurm.env)

    assert reservation_nodes(slurm) == ["n1", "n2"]
    assert state(slurm, "n3") == "IDLE"  # released: production jobs may start there
    assert "DRAIN" not in state(slurm, "n1")  # our drain lifted; still held for burn-in
    assert node_field(slurm, "n1", "Reason") == ""
    assert node_field(slurm, "n4", "Reason") == "ops: firmware update"
    assert {"release n3 (a01-n03: in_service)", "resume n1 (a01-n01: burn_in)"} <= set(resumed.stdout.splitlines())


def test_a_node_in_service_is_resumed_and_released_once_its_device_is(
    clean: Slurm, stack: Stack, tmp_path: Path
) -> None:
    """accepted (held) → in_service (released), and a drain of ours lifted (needs_repair → … → in_service)."""
    slurm = clean
    config = gate_config(slurm, tmp_path)
    move("a01-n02", DeviceState.NEEDS_REPAIR, cause=TransitionCause.FAILED_TOO_OFTEN, reason=WHY)
    move("a01-n03", DeviceState.ACCEPTED)
    stack.agent("gate", "--config", config, **slurm.env)
    assert node_field(slurm, "n2", "Reason") == DRAIN_REASON
    assert set(reservation_nodes(slurm)) >= {"n2", "n3"}

    move("a01-n02", DeviceState.BURN_IN, cause=TransitionCause.REPAIR)
    move("a01-n02", DeviceState.ACCEPTED)
    move("a01-n02", DeviceState.IN_SERVICE)
    move("a01-n03", DeviceState.IN_SERVICE)
    stack.agent("gate", "--config", config, **slurm.env)

    assert (state(slurm, "n2"), node_field(slurm, "n2", "Reason")) == ("IDLE", "")
    assert state(slurm, "n3") == "IDLE"
    assert not {"n2", "n3"} & set(reservation_nodes(slurm))


def counted(action: str, result: str) -> float:
    return (
        metrics.REGISTRY.get_sample_value("fleet_agent_node_gate_changes_total", {"action": action, "result": result})
        or 0.0
    )


def test_burn_in_runs_on_a_held_node_through_the_reservation_and_nothing_else_does(
    clean: Slurm, stack: Stack, tmp_path: Path
) -> None:
    slurm = clean
    holds = counted("hold", "applied")
    client = FleetClient(stack.base, stack.client_id, stack.client_secret)
    gate = SlurmGate(SlurmSettings(node_names=HOSTS), environ=dict(os.environ) | slurm.env)
    try:
        # in process, to read its counters: every a01 device is in burn_in
        report = gate_sweep(client, gate, site="lon-1", satellite="sat-a")
    finally:
        client.close()
    assert [c.describe() for c in report.applied] == [f"hold n{i} (a01-n0{i}: burn_in)" for i in range(1, 5)]
    assert counted("hold", "applied") == holds + 4
    assert metrics.REGISTRY.get_sample_value("fleet_agent_node_gate_left_alone", {"why": "not_in_slurm"}) == len(
        report.skipped
    )
    assert reservation_nodes(slurm) == ["n1", "n2", "n3", "n4"]
    executor = SlurmExecutor(
        {"t": {"template": slurm.replay(DCGM_PASS), "parser": "dcgm-diag-json"}},
        SlurmSettings(output_dir=str(tmp_path / "out"), poll_interval=0.2, reservation="fleet-burnin", time_margin=0),
        timeout_s=60,
        environ=dict(os.environ) | slurm.env,
    )

    outcome = executor.run(
        TestRun(requirement="r", test="t", parameters={}, targets=(Target("d", "n3", "gpu.h200.8x"),)), attempt=1
    )

    assert outcome.status == "completed", outcome.error
    other = slurm.command("sbatch", "--parsable", "--nodelist=n3", "--output=/dev/null", "--wrap=true")
    job = other.stdout.strip()
    try:
        time.sleep(2)
        assert slurm.job_field(job, "JobState") == "PENDING"  # a production job does not start on a held node
    finally:
        slurm.command("scancel", job)


def test_a_node_in_someone_elses_reservation_is_not_taken_over(clean: Slurm, stack: Stack, tmp_path: Path) -> None:
    slurm = clean
    made = slurm.command(
        "scontrol", "create", "reservation", "ReservationName=ops-maint", "Nodes=n4", "StartTime=now",
        "Duration=60", "Users=root",
    )  # fmt: skip
    assert made.returncode == 0, made.stderr

    gated = stack.agent("gate", "--config", gate_config(slurm, tmp_path), **slurm.env)

    assert reservation_nodes(slurm) == ["n1", "n2", "n3"]
    assert reservation_nodes(slurm, "ops-maint") == ["n4"]
    assert "left n4 (a01-n04: burn_in) alone, foreign_reservation: in another reservation" in gated.stdout


def test_with_the_gate_on_an_agent_pass_runs_burn_in_inside_the_reservation(
    clean: Slurm, stack: Stack, tmp_path: Path
) -> None:
    slurm = clean
    config = gate_config(slurm, tmp_path)
    stack.agent("once", "--config", config, **slurm.env)  # registers the workflows; holds n1..n4
    stack.dispatch([device("a01-n02").id])
    before = len(slurm.steps())

    stack.agent("once", "--config", config, **slurm.env)

    jobs = sorted({step.split(".")[0] for step, on, _ in slurm.steps()[before:] if on == "n2"})
    assert jobs, "no burn-in step ran on n2"
    assert {slurm.job_field(job, "Reservation") for job in jobs} == {"fleet-burnin"}
    diag = TestExecution.objects.get(requirement__name="gpu-diag", device=device("a01-n02"))
    assert diag.status == "completed", diag.error
    assert reservation_nodes(slurm) == ["n1", "n2", "n3", "n4"]  # still burn_in: still held
