"""The node gate's reading of Slurm (real `scontrol` outputs, tests/agent/fixtures/slurm/SOURCES.md) and
its configuration. Its decision is tested in tests/rules/test_node_gate.py; its changes against a real
Slurm in tests/slurm/test_node_gate.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from fleet_agent.config import ConfigError, load_config
from fleet_agent.node_gate import GateError, GateReport, parse_nodes, parse_reservations
from fleet_rules.node_gate import GateChange, NodeView
from fleet_rules.vocabulary import DeviceState, NodeGateAction

FIXTURES = Path(__file__).parent / "fixtures" / "slurm"
REQUIRED = {"api": "http://x", "site": "s", "satellite": "a", "client_id": "i", "client_secret": "p"}


def test_every_node_of_a_real_scontrol_show_node_is_read_with_its_drain_reason_and_reservation() -> None:
    nodes = parse_nodes((FIXTURES / "scontrol_show_node_o_22.05.txt").read_text())

    assert nodes == {
        "n1": NodeView("n1", drained=False, down=True, reason="Not responding", reserved=True),
        "n2": NodeView("n2", drained=True, reason="someone: bad fan", reserved=True),
        "n3": NodeView(
            "n3",
            drained=True,
            reason="fleet-burnin: needs repair: gpu-diag failed 3 times under the current policy version "
            "(repair_after_failures 3)",
            reserved=True,
        ),
        "n4": NodeView("n4", drained=True, reason="ops: Reason=odd [ticket 4411] wait"),  # draining: a job runs
    }


def test_a_node_without_a_reason_has_none_and_lines_that_are_not_nodes_are_ignored() -> None:
    text = "NodeName=gpu-a01-01 Arch=x86_64 OS=Linux 6.1 #1 SMP State=MIXED ThreadsPerCore=2\nNo nodes in the system\n"
    assert parse_nodes(text) == {"gpu-a01-01": NodeView("gpu-a01-01")}
    assert parse_nodes("") == {}


def test_a_node_line_without_a_state_is_refused_rather_than_guessed() -> None:
    with pytest.raises(GateError, match="no State= for node n9"):
        parse_nodes("NodeName=n9 Arch=x86_64 CPUTot=1\n")


def test_reservations_are_read_with_their_node_expressions() -> None:
    text = (FIXTURES / "scontrol_show_reservation_o_22.05.txt").read_text()
    assert parse_reservations(text) == {"fleet-burnin": "n[1,3]", "maint-ops": "n2"}
    assert parse_reservations("No reservations in the system\n") == {}


def test_the_gate_needs_the_slurm_executor_and_defaults_the_reservation_burn_in_jobs_use() -> None:
    with pytest.raises(ConfigError, match="node_gate: needs the slurm executor"):
        load_config(REQUIRED | {"node_gate": True}, environ={})
    commands = {"t": {"template": "true", "parser": "dcgm-diag-json"}}
    gated = load_config(REQUIRED | {"executor": "slurm", "node_gate": True, "commands": commands}, environ={})
    assert gated.slurm_settings().reservation == "fleet-burnin"
    own = load_config(
        REQUIRED | {"executor": "slurm", "node_gate": True, "commands": commands, "slurm_reservation": "hall-a"},
        environ={},
    )
    assert own.slurm_settings().reservation == "hall-a"
    ungated = load_config(REQUIRED | {"executor": "slurm", "commands": commands}, environ={})
    assert ungated.slurm_settings().reservation == ""
    assert load_config(REQUIRED, environ={"FLEET_AGENT_DRY_RUN": "yes"}).dry_run is True


def test_a_dry_run_report_says_what_would_change_and_a_sweep_with_nothing_to_do_says_so() -> None:
    change = GateChange(NodeGateAction.DRAIN, "n1", "a01-n01", DeviceState.NEEDS_REPAIR, "fleet-burnin: needs repair")
    dry = GateReport(dry_run=True, devices=4, planned=[change])
    assert dry.lines() == ['would drain n1 (a01-n01: needs_repair) reason="fleet-burnin: needs repair"']
    assert GateReport(dry_run=False, devices=4).lines() == ["nothing to change (4 device(s))"]
