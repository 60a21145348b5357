"""`nvidia-smi --query-gpu=<fields> --format=csv[,noheader][,nounits]` output → per-GPU health metrics.

Columns are taken in the order of the queried `fields`, because nvidia-smi renames some of them in its
header (`clocks.sm` prints as `clocks.current.sm [MHz]`) and prints no header at all with `noheader`.

Metric names (`FIELD_METRICS`); a numeric field not listed there is named after the field with dots
replaced by underscores, and `index` and text fields (name, uuid, serial, ...) give no metric:

    remapped_rows.pending                        → ecc_pending_row_remaps
    remapped_rows.failure                        → ecc_row_remap_failures
    remapped_rows.correctable / .uncorrectable   → ecc_correctable_row_remaps / ecc_uncorrectable_row_remaps
    ecc.errors.uncorrected.{volatile,aggregate}.sram   → sram_uncorrectable_errors
    ecc.errors.uncorrected.{volatile,aggregate}.dram   → dram_uncorrectable_errors
    ecc.errors.uncorrected.{volatile,aggregate}.total  → uncorrectable_ecc_errors
    temperature.gpu → gpu_temp_c          temperature.memory → hbm_temp_c
    clocks.sm, clocks.current.sm → sm_clock_mhz          clocks.max.sm → sm_clock_max_mhz
    power.draw → power_draw_w             memory.used / memory.total → memory_used_mib / memory_total_mib
    utilization.gpu → gpu_utilization_pct

    clocks_event_reasons.active, clocks_throttle_reasons.active → clocks_event_reasons_active (bitmask)

Values are typed by what nvidia-smi prints, never guessed: hexadecimal cells (`0x0000000000000001`, the
clock-event bitmasks) read as integers; fields that are text by nature (`TEXT_FIELDS`: name, uuid, serial,
pci.bus_id, driver_version, vbios_version, ...) give no metric even when a cell looks like a number
(`driver_version` 460.91, `pci.bus_id` 00000000:3B:00.0), and any other cell that is not a plain number with
an optional unit is text, never `0`.

Each metric has value = the worst GPU (max) and statistics min/max/mean over GPUs; when two queried fields
map to one metric (volatile and aggregate counters) each GPU counts with the larger of the two.
`Yes`/`No` read as 1/0. `[N/A]`, `[Not Supported]` and the like are missing: if any GPU lacks a metric,
the metric carries no value and no statistics at all, so that a rule on it fails instead of the
remaining GPUs vouching for the silent one. `gpu_count` is the number of GPU rows.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from fleet_agent.parsers import Metrics, ParseError, summarise

__all__ = ["FIELD_METRICS", "TEXT_FIELDS", "parse_query_csv"]

FIELD_METRICS: Mapping[str, str] = {
    "remapped_rows.pending": "ecc_pending_row_remaps",
    "remapped_rows.failure": "ecc_row_remap_failures",
    "remapped_rows.correctable": "ecc_correctable_row_remaps",
    "remapped_rows.uncorrectable": "ecc_uncorrectable_row_remaps",
    "ecc.errors.uncorrected.volatile.sram": "sram_uncorrectable_errors",
    "ecc.errors.uncorrected.aggregate.sram": "sram_uncorrectable_errors",
    "ecc.errors.uncorrected.volatile.dram": "dram_uncorrectable_errors",
    "ecc.errors.uncorrected.aggregate.dram": "dram_uncorrectable_errors",
    "ecc.errors.uncorrected.volatile.total": "uncorrectable_ecc_errors",
    "ecc.errors.uncorrected.aggregate.total": "uncorrectable_ecc_errors",
    "temperature.gpu": "gpu_temp_c",
    "temperature.memory": "hbm_temp_c",
    "clocks.sm": "sm_clock_mhz",
    "clocks.current.sm": "sm_clock_mhz",
    "clocks.max.sm": "sm_clock_max_mhz",
    "power.draw": "power_draw_w",
    "memory.used": "memory_used_mib",
    "memory.total": "memory_total_mib",
    "utilization.gpu": "gpu_utilization_pct",
    "clocks_event_reasons.active": "clocks_event_reasons_active",
    "clocks_throttle_reasons.active": "clocks_event_reasons_active",
}

#: Fields whose values are identifiers or versions, not quantities.
TEXT_FIELDS: frozenset[str] = frozenset(
    {
        "timestamp", "driver_version", "name", "gpu_name", "serial", "gpu_serial", "uuid", "gpu_uuid",
        "pci.bus_id", "gpu_bus_id", "pci.domain", "pci.bus", "pci.device", "pci.device_id", "pci.sub_device_id",
        "vbios_version", "inforom.img", "inforom.oem", "inforom.ecc", "inforom.pwr", "pstate", "compute_mode",
        "display_mode", "display_active", "persistence_mode", "accounting.mode", "driver_model.current",
        "driver_model.pending", "gom.current", "gom.pending", "mig.mode.current", "mig.mode.pending",
        "compute_cap", "board_id", "gpu_part_number",
    }
)  # fmt: skip

_NOT_METRICS = frozenset({"index"})
_DEFAULT_UNITS = {
    "gpu_temp_c": "C",
    "hbm_temp_c": "C",
    "sm_clock_mhz": "MHz",
    "sm_clock_max_mhz": "MHz",
    "power_draw_w": "W",
    "memory_used_mib": "MiB",
    "memory_total_mib": "MiB",
    "gpu_utilization_pct": "%",
}
_HEADER_NAMES = frozenset({"index", "name", "uuid", "serial", "count", "pstate", "timestamp", "driver_version"})
_HEADER_CELL = re.compile(r"^[A-Za-z_][A-Za-z0-9_.]*(?:\s*\[([^\]]+)\])?$")
_NUMBER = re.compile(r"^(-?\d+(?:\.\d+)?)(?:\s*([A-Za-z%][A-Za-z/%]*))?$")
_HEX = re.compile(r"^0[xX][0-9a-fA-F]+$")
_FAILURES = re.compile(
    r"NVIDIA-SMI has failed|No devices were found|is not a valid field|Unable to determine|couldn't communicate",
    re.IGNORECASE,
)
_TEXT = "text"

Reading = tuple[int | float | str | None, str | None]


def parse_query_csv(text: str, fields: Sequence[str]) -> Metrics:
    """Per-GPU values of the queried fields, summarised over GPUs (see the module docstring)."""
    fields = [field.strip() for field in fields]
    if not fields:
        raise ParseError("no nvidia-smi query fields given")
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    for line in lines:
        if _FAILURES.search(line):
            raise ParseError(f"nvidia-smi failed: {line[:300]}")
    header_units: list[str | None] = [None] * len(fields)
    if lines and _is_header(_cells(lines[0]), fields):
        header = _cells(lines[0])
        if len(header) != len(fields):
            raise ParseError(f"nvidia-smi printed {len(header)} columns for {len(fields)} queried fields")
        header_units = [_header_unit(cell) for cell in header]
        lines = lines[1:]
    if not lines:
        raise ParseError("nvidia-smi printed no GPU rows")

    rows = [_cells(line) for line in lines]
    for line, row in zip(lines, rows, strict=True):
        if len(row) != len(fields):
            raise ParseError(f"nvidia-smi row has {len(row)} columns for {len(fields)} queried fields: {line[:200]!r}")
        if "index" in fields and not row[fields.index("index")].isdigit():
            raise ParseError(f"nvidia-smi row does not start with a GPU index: {line[:200]!r}")

    per_gpu: dict[str, list[int | float | None]] = {}
    units: dict[str, str] = {}
    for column, field in enumerate(fields):
        if field in _NOT_METRICS or field in TEXT_FIELDS:
            continue
        readings = [_reading(row[column]) for row in rows]
        if all(reading is None or reading == _TEXT for reading, _ in readings) and any(
            reading == _TEXT for reading, _ in readings
        ):
            continue
        metric = FIELD_METRICS.get(field, field.replace(".", "_"))
        unit = header_units[column] or next((unit for _, unit in readings if unit), None)
        if unit:
            units.setdefault(metric, unit)
        values = [reading if isinstance(reading, int | float) else None for reading, _ in readings]
        previous = per_gpu.get(metric)
        per_gpu[metric] = values if previous is None else [_worse(a, b) for a, b in zip(previous, values, strict=True)]

    metrics: Metrics = {"gpu_count": {"value": len(rows)}}
    for metric in sorted(per_gpu):
        entry: dict[str, object] = {}
        unit = units.get(metric, _DEFAULT_UNITS.get(metric))
        if unit:
            entry["unit"] = unit
        values = per_gpu[metric]
        numbers = [value for value in values if value is not None]
        if len(numbers) == len(values):
            statistics = summarise(numbers)
            entry["value"] = statistics["max"]
            entry["statistics"] = statistics
        metrics[metric] = entry
    return metrics


def _cells(line: str) -> list[str]:
    return [cell.strip() for cell in line.split(",")]


def _is_header(cells: list[str], fields: Sequence[str]) -> bool:
    """A header names fields; a data row never does (values are numbers, `Yes`/`No`, `[N/A]` or text)."""

    def names_a_field(cell: str, field: str) -> bool:
        match = _HEADER_CELL.match(cell)
        if not match:
            return False
        name = cell.split("[", 1)[0].strip()
        return name == field or "." in name or name in _HEADER_NAMES

    return bool(cells) and all(names_a_field(cell, field) for cell, field in zip(cells, fields, strict=False))


def _header_unit(cell: str) -> str | None:
    match = _HEADER_CELL.match(cell)
    return match.group(1) if match and match.group(1) else None


def _reading(cell: str) -> Reading:
    """(number, unit) of a cell; None for N/A-like cells, `_TEXT` for non-numeric text."""
    if not cell or cell.upper() == "N/A" or (cell.startswith("[") and cell.endswith("]")):
        return None, None
    if _HEX.match(cell):
        return int(cell, 16), None
    lowered = cell.lower()
    if lowered == "yes":
        return 1, None
    if lowered == "no":
        return 0, None
    match = _NUMBER.match(cell)
    if not match:
        return _TEXT, None
    number = match.group(1)
    return (float(number) if "." in number else int(number)), match.group(2)


def _worse(a: int | float | None, b: int | float | None) -> int | float | None:
    return None if a is None or b is None else max(a, b)
