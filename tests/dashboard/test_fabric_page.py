"""The InfiniBand ports' error counters on the execution page (issue 38, item 4): each port's state and counters
before and after, growth marked by a symbol and a word, and counters that cannot show growth said so."""

from __future__ import annotations

from tests.dashboard.conftest import VIEWER
from tests.dashboard.test_health_pages import RC, health_site, window

__all__ = ["health_site"]


def fabric_port(name: str, **overrides) -> dict:
    return {
        "port": name,
        "state_before": "ACTIVE",
        "state_after": "ACTIVE",
        "before": {"link_downed": 1, "symbol_error": 0},
        "after": {"link_downed": 4, "symbol_error": 0},
        "saturated": [],
        "reset": [],
    } | overrides


def test_the_execution_page_shows_each_ports_counters(fleet, health_site, person):
    _, satellite, requirement = health_site
    device = fleet.device(satellite, RC, hostname="a01-n00")
    evidence = window() | {
        "fabric": {
            "source": "sysfs",
            "ports": [
                fabric_port("mlx5_0/1"),
                fabric_port(
                    "mlx5_1/1",
                    before={"link_downed": 255},
                    after={"link_downed": 255},
                    saturated=["link_downed"],
                    state_after="DOWN",
                ),  # fmt: skip
            ],
        }
    }
    execution = fleet.execution(requirement, device=device, health=evidence, metrics={"xid_fatal_count": {"value": 0}})

    text = person(VIEWER).get(f"/executions/{execution.id}/").content.decode()

    assert "InfiniBand ports" in text and "(sysfs)" in text
    assert 'data-port="mlx5_0/1" data-counter="link_downed"' in text
    row = text[text.index('data-port="mlx5_0/1" data-counter="link_downed"') :]
    assert "✗ +3" in row[: row.index("</tr>")]
    saturated = text[text.index('data-port="mlx5_1/1"') :]
    assert "unknown: saturated" in saturated[: saturated.index("</tr>")]
    assert "✗ DOWN" in saturated  # the port went down and stayed down


def test_an_execution_without_fabric_evidence_shows_no_ports(fleet, health_site, person):
    _, satellite, requirement = health_site
    device = fleet.device(satellite, RC, hostname="a01-n00")
    execution = fleet.execution(requirement, device=device, health=window(), metrics={"xid_fatal_count": {"value": 0}})

    text = person(VIEWER).get(f"/executions/{execution.id}/").content.decode()

    assert "Health of the window" in text and "InfiniBand ports" not in text
