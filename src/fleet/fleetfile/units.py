"""A requirement's metric definitions in the fleet file: `metrics: {busbw_gbps: {unit: GB/s}}`,
each metric's unit as the dashboard and the CSV show its values (judges nothing)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from fleet.fleetfile.reader import Reader

MAX_UNIT_LENGTH = 16


def read_metric_units(r: Reader, m: dict[str, Any], where: str) -> dict[str, str]:
    """`metrics: {busbw_gbps: {unit: GB/s}}`: each metric's unit, as pages show its values."""
    units: dict[str, str] = {}
    for metric, definition in r.object(m, "metrics", where).items():
        at = f"{where}.metrics.{metric}"
        if not isinstance(metric, str) or not metric or len(metric) > 100:
            r.problem(at, "a metric name is a string of at most 100 characters")
            continue
        declared = r.mapping(definition, at, {"unit"})
        if declared is None:
            continue
        unit = r.string(declared, "unit", at, max_length=MAX_UNIT_LENGTH)
        if unit:
            units[metric] = unit
    return units
