"""Fabric error deltas across a burn-in window: how each InfiniBand port's error counters grew between the job's
start and its `health-window` test, as metrics a requirement judges and as the `health.fabric` evidence.

| metric | value | per port (`statistics`) |
|---|---|---|
| `ib_link_downed_delta` | the growth of `link_downed` summed over ports | its growth |
| `ib_symbol_error_delta` | the growth of `symbol_error` summed over ports | its growth |
| `ib_port_rcv_errors_delta` | the growth of `port_rcv_errors` summed over ports | its growth |
| `ib_link_flaps` | the worst port's flaps: times its link went down and came back | its flaps |

A port's flaps are its `link_downed` growth, less the last one when the port is not `ACTIVE` at the end of the
window (that link went down and stayed down: a drop, which `ib_link_downed_delta` counts). A metric has no value —
and a rule on it fails closed — when a port's growth is unknown: the port is missing at either end, a counter is
missing, went backwards (someone reset it during the window, or the driver reloaded), or stood at its maximum
before the window (the fixed-width PortCounters saturate: a `link_downed` of 255 cannot show another link-down).
Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from fleet_agent.parsers import Metrics
from fleet_agent.parsers.ib_counters import COUNTER_MAX, IB_COUNTERS
from fleet_rules.health_evidence import MAX_FABRIC_PORTS

__all__ = ["FABRIC_DELTAS", "FABRIC_METRICS", "fabric_evidence", "fabric_metrics"]

#: metric → the counter whose growth it sums.
FABRIC_DELTAS: Mapping[str, str] = {
    "ib_link_downed_delta": "link_downed",
    "ib_symbol_error_delta": "symbol_error",
    "ib_port_rcv_errors_delta": "port_rcv_errors",
}
FABRIC_METRICS: tuple[str, ...] = (*FABRIC_DELTAS, "ib_link_flaps")
_ACTIVE = "ACTIVE"


def _growth(before: Mapping[str, Any] | None, after: Mapping[str, Any] | None, counter: str) -> int | None:
    """How much one port's counter grew, or None when that cannot be known (see the module docstring)."""
    if before is None or after is None:
        return None
    first, second = before["counters"].get(counter), after["counters"].get(counter)
    if not isinstance(first, int) or not isinstance(second, int) or second < first:
        return None
    if before.get("saturating") and first >= COUNTER_MAX[counter]:
        return None
    return second - first


def _flaps(before: Mapping[str, Any] | None, after: Mapping[str, Any] | None) -> int | None:
    downs = _growth(before, after, "link_downed")
    if downs is None or after is None:
        return None
    if downs and after.get("state") not in (None, _ACTIVE):
        return downs - 1
    return downs


def fabric_metrics(before: Mapping[str, Any], after: Mapping[str, Any]) -> Metrics:
    """The four metrics from the `ports` of two `parse_ib_counters` results (see the module docstring)."""
    names = sorted(set(before) | set(after))
    same_ports = set(before) == set(after)
    metrics: Metrics = {}
    for metric, counter in FABRIC_DELTAS.items():
        statistics = {port: _growth(before.get(port), after.get(port), counter) for port in names}
        metrics[metric] = _entry(statistics, same_ports, sum)
    flaps = {port: _flaps(before.get(port), after.get(port)) for port in names}
    metrics["ib_link_flaps"] = _entry(flaps, same_ports, max)
    return metrics


def _entry(statistics: dict[str, int | None], complete: bool, combine: Any) -> dict[str, Any]:
    entry: dict[str, Any] = {"statistics": dict(statistics)}
    values = [value for value in statistics.values() if value is not None]
    if complete and statistics and len(values) == len(statistics):
        entry["value"] = combine(values)
    return entry


def fabric_evidence(source: str, before: Mapping[str, Any], after: Mapping[str, Any]) -> dict[str, Any]:
    """The `health.fabric` object: each port's state and counters before and after (at most `MAX_FABRIC_PORTS`
    ports, the ones whose counters grew first), and which counters could not be compared and why."""
    rows = []
    for port in sorted(set(before) | set(after)):
        first, second = before.get(port), after.get(port)
        grew = any((_growth(first, second, counter) or 0) > 0 for counter in IB_COUNTERS)
        rows.append(
            (
                not grew,
                {
                    "port": port,
                    "state_before": first["state"] if first else None,
                    "state_after": second["state"] if second else None,
                    "before": dict(first["counters"]) if first else {},
                    "after": dict(second["counters"]) if second else {},
                    "saturated": sorted(
                        counter
                        for counter in IB_COUNTERS
                        if first
                        and first.get("saturating")
                        and isinstance(first["counters"].get(counter), int)
                        and first["counters"][counter] >= COUNTER_MAX[counter]
                    ),
                    "reset": sorted(
                        counter
                        for counter in IB_COUNTERS
                        if first
                        and second
                        and isinstance(first["counters"].get(counter), int)
                        and isinstance(second["counters"].get(counter), int)
                        and second["counters"][counter] < first["counters"][counter]
                    ),
                },
            )
        )
    rows.sort(key=lambda row: row[0])  # stable: the ports whose counters grew first, each group by name
    return {"source": source, "ports": [row for _, row in rows[:MAX_FABRIC_PORTS]]}
