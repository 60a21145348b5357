"""Values in the words and signs an operator reads: a rule as `busbw_gbps ≥ 431 GB/s`, a measured
value with its unit, a margin as `−33.1 %` (one minus sign, U+2212, everywhere), parameters with
their units. One place for every page, the CSV and the command line; formatting only, no rule.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from fleet_rules.evidence import RuleOutcome
from fleet_rules.vocabulary import Comparator

MINUS = "\u2212"

#: The comparator as the sign a reader expects.
COMPARATOR_SIGNS: dict[str, str] = {
    Comparator.GT: ">",
    Comparator.LT: "<",
    Comparator.EQ: "=",
    Comparator.GTE: "≥",
    Comparator.LTE: "≤",
}

#: How a measured value stands to its threshold (`RuleOutcome.relation`), in words.
RELATION_WORDS: dict[str, str] = {"<": "is below", ">": "is above", "=": "equals", "≠": "is not"}

#: Units a name's suffix states when nothing declares or reports one (`duration_s`, `busbw_gbps`).
SUFFIX_UNITS: tuple[tuple[str, str], ...] = (
    ("_gbps", "GB/s"),
    ("_tbps", "TB/s"),
    ("_mbps", "MB/s"),
    ("_ms", "ms"),
    ("_s", "s"),
    ("_bytes", "bytes"),
    ("_pct", "%"),
    ("_celsius", "°C"),
    ("_watts", "W"),
)


def number(value: Any) -> str:
    """A number as people write it: `288.44`, `17179869184`, `−3.5` (U+2212); text as it is."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return f"{MINUS}{-value}" if value < 0 else str(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            return "NaN" if math.isnan(value) else ("∞" if value > 0 else f"{MINUS}∞")
        text = f"{value:.15g}" if value.is_integer() and abs(value) < 1e15 else f"{value:.6g}"
        if "e" in text and 1 <= abs(value) < 1e15:  # a large value keeps its digits: 1234567.5, not 1.23457e+06
            text = f"{value:.1f}"
        return text.replace("-", MINUS)
    return "—" if value is None else str(value)


def unit_of_name(name: str) -> str:
    """The unit a metric's or parameter's name states by its suffix, or ""."""
    for suffix, unit in SUFFIX_UNITS:
        if name.endswith(suffix) or name == suffix[1:]:
            return unit
    return ""


def metric_unit(metrics: Mapping[str, Any] | None, metric: str, declared: str = "") -> str:
    """A metric's unit: the one the requirement declares, else the one reported beside the value,
    else what its name says."""
    if declared:
        return declared
    reading = (metrics or {}).get(metric)
    reported = reading.get("unit") if isinstance(reading, Mapping) else None
    if isinstance(reported, str) and reported.strip():
        return reported.strip()[:16]
    return unit_of_name(metric)


def quantity(value: Any, unit: str = "") -> str:
    """`288.44 GB/s`; `missing` for nothing measured."""
    if value is None:
        return "missing"
    shown = number(value) if not isinstance(value, str) else f'"{value}"'
    return f"{shown} {unit}" if unit and not isinstance(value, str) else shown


def rule_text(name: str, comparator: str | None, threshold: Any, unit: str = "") -> str:
    """`busbw_gbps ≥ 431 GB/s`."""
    return f"{name} {condition(comparator, threshold, unit)}"


def condition(comparator: str | None, threshold: Any, unit: str = "") -> str:
    """`≥ 431 GB/s`: what a rule asks of the value."""
    sign = COMPARATOR_SIGNS.get(comparator or "", comparator or "?")
    return f"{sign} {quantity(threshold, unit)}"


def margin(share: float | None) -> str:
    """A margin as a signed percentage: `−33.1 %`, `+5.0 %` ("" when there is none)."""
    if share is None:
        return ""
    return f"{MINUS if share < 0 else '+'}{abs(share) * 100:.1f} %"


def percent(share: float) -> str:
    """A share as a percentage, with the one minus sign: `37.5 %`."""
    return f"{MINUS if share < 0 else ''}{abs(share) * 100:.1f} %"


def outcome_text(outcome: RuleOutcome, unit: str = "", *, with_margin: bool = True) -> str:
    """Why a rule failed (or passed), in words:
    `busbw_gbps 288.44 GB/s is below ≥ 431 GB/s (−33.1 %)`, `… missing (needs ≥ 431 GB/s)`."""
    needs = condition(outcome.comparator, outcome.threshold, unit)
    if outcome.value is None:
        return f"{outcome.name} missing (needs {needs})"
    relation = RELATION_WORDS.get(outcome.relation, "is")
    text = f"{outcome.name} {quantity(outcome.value, unit)} {relation} {needs}"
    shown = margin(outcome.margin) if with_margin else ""
    return f"{text} ({shown})" if shown else text


def z_text(z: float, k: float) -> str:
    """A robust z with the k it is measured against: `robust z −4.2 (beyond k = 3.5)`."""
    return f"robust z {number(round(z, 1))} (beyond k = {number(k)})"


_BINARY = (("TiB", 2**40), ("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10))


def parameter_value(name: str, value: Any) -> str:
    """A parameter's value with the unit its name states: `120 s`, `17179869184 bytes (16 GiB)`."""
    if isinstance(value, Mapping):
        return "; ".join(f"{k}: {parameter_value(str(k), v)}" for k, v in value.items())
    if isinstance(value, list | tuple):
        return ", ".join(parameter_value(name, v) for v in value)
    unit = unit_of_name(name)
    if unit == "bytes" and isinstance(value, int) and not isinstance(value, bool):
        for label, size in _BINARY:
            if value >= size:
                scaled = value / size
                return f"{number(value)} bytes ({number(round(scaled, 1))} {label})"
        return f"{number(value)} bytes"
    if isinstance(value, str):
        return value
    return quantity(value, unit)


def parameter_items(parameters: Mapping[str, Any] | None) -> list[tuple[str, str]]:
    """Parameters as (name, value with unit) pairs, in name order: a definition list."""
    if not isinstance(parameters, Mapping):
        return []
    return [(str(name), parameter_value(str(name), parameters[name])) for name in sorted(parameters, key=str)]
