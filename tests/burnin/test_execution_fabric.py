"""The InfiniBand ports' error counters on an execution report's health evidence (issue 38, item 4): validated
strictly (port and counter names from the machine under test are hostile text), stored with the execution, read
back by the rules' `fabric_rows`."""

from __future__ import annotations

import uuid

import pytest

from fleet.burnin.models import TestExecution
from fleet_rules.health_evidence import MAX_FABRIC_PORTS, fabric_rows, health_read
from tests.burnin.test_execution_health import URL, health, report, setting, state_of  # noqa: F401 - fixture

__all__ = ["setting"]


def port(name: str = "mlx5_0/1", **overrides) -> dict:
    return {
        "port": name,
        "state_before": "ACTIVE",
        "state_after": "ACTIVE",
        "before": {"link_downed": 1, "symbol_error": 0, "port_rcv_errors": 14},
        "after": {"link_downed": 4, "symbol_error": 0, "port_rcv_errors": 14},
        "saturated": [],
        "reset": [],
    } | overrides


def fabric(*ports: dict, **overrides) -> dict:
    return {"source": "sysfs", "ports": list(ports)} | overrides


def test_fabric_evidence_is_stored_read_back_and_read_by_the_rules(bearer, setting):
    device, _, _ = setting
    execution_id = uuid.uuid4()
    sent = health(fabric=fabric(port(), port("mlx5_bond_0/1", saturated=["link_downed"], reset=["symbol_error"])))

    created = bearer(["test-execution:report"]).put(URL.format(execution_id), report(device, sent), format="json")

    assert created.status_code == 201, created.content
    stored = TestExecution.objects.get(id=execution_id).health
    assert stored["fabric"]["ports"][0] == port()
    assert created.json()["health"]["fabric"] == stored["fabric"]
    (flapped, bond) = fabric_rows(stored)
    assert flapped.port == "mlx5_0/1" and [(c.metric, c.delta) for c in flapped.grew] == [("link_downed", 3)]
    assert bond.saturated == ["link_downed"] and bond.reset == ["symbol_error"] and not bond.went_down
    read = health_read(stored)
    assert read is not None and read.fabric_source == "sysfs" and len(read.fabric) == 2


def test_a_trailing_newline_is_trimmed_from_names_never_kept(bearer, setting):
    device, _, _ = setting
    sent = health(fabric=fabric(port("mlx5_0/1\n", state_before="ACTIVE\n", reset=["link_downed\n"])))
    response = bearer(["test-execution:report"]).put(URL.format(uuid.uuid4()), report(device, sent), format="json")
    assert response.status_code == 201, response.content
    (stored,) = response.json()["health"]["fabric"]["ports"]
    assert (stored["port"], stored["state_before"], stored["reset"]) == ("mlx5_0/1", "ACTIVE", ["link_downed"])


def test_a_report_without_fabric_evidence_reads_null(bearer, setting):
    device, _, _ = setting
    response = bearer(["test-execution:report"]).put(URL.format(uuid.uuid4()), report(device, health()), format="json")
    assert response.status_code == 201 and response.json()["health"]["fabric"] is None
    assert fabric_rows(response.json()["health"]) == []


@pytest.mark.parametrize(
    ("fabric_object", "field"),
    [
        (fabric(port("../../etc/1")), "health.fabric.ports.0.port"),
        (fabric(port("mlx5_0")), "health.fabric.ports.0.port"),
        (fabric(port("mlx5 0/1")), "health.fabric.ports.0.port"),
        (fabric(port("mlx5_0/1\n/2")), "health.fabric.ports.0.port"),
        (fabric(port(state_after="4: ACTIVE")), "health.fabric.ports.0.state_after"),
        (fabric(port(before={"link downed": 1})), "health.fabric.ports.0.before"),
        (fabric(port(before={"link_downed\n": 1})), "health.fabric.ports.0.before"),
        (fabric(port(after={"link_downed": "3"})), "health.fabric.ports.0.after.link_downed"),
        (fabric(port(after={f"c{i}": 0 for i in range(17)})), "health.fabric.ports.0.after"),
        (fabric(port(saturated=["Link_Downed"])), "health.fabric.ports.0.saturated.0"),
        (fabric(port(), port()), "health.fabric.ports"),
        (fabric(*(port(f"mlx5_{i}/1") for i in range(MAX_FABRIC_PORTS + 1))), "health.fabric.ports"),
        (fabric(port(), source="ethtool"), "health.fabric.source"),
        (fabric(port(), ports={"port": "mlx5_0/1"}), "health.fabric.ports"),
    ],
)
def test_bad_fabric_evidence_names_the_field_and_writes_nothing(bearer, setting, fabric_object, field):
    device, _, _ = setting
    response = bearer(["test-execution:report"]).put(
        URL.format(uuid.uuid4()), report(device, health(fabric=fabric_object)), format="json"
    )
    assert response.status_code == 400, response.content
    assert field in {e["field"] for e in response.json()["field_errors"]}, response.json()
    assert TestExecution.objects.count() == 0
