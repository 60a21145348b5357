"""`free_port` on a machine where each user has a range of ports (`FLEET_TEST_PORTS`): the suite's
workers draw from the same range at once, so a port is drawn at random from it, not the lowest
free one every worker would take (a test's agent once reached another worker's server on it)."""

from __future__ import annotations

from tests.helpers import free_port


def test_ports_are_drawn_across_the_range_not_the_lowest_each_time(monkeypatch):
    monkeypatch.setenv("FLEET_TEST_PORTS", "41000-41099")
    drawn = {free_port() for _ in range(20)}
    assert all(41000 <= port <= 41099 for port in drawn)
    assert len(drawn) > 1, drawn
