"""Parsers from burn-in tools' real output to the metrics an execution reports.

Every parser is a pure function of the tool's text and returns
`{"<metric>": {"value": ..., "unit": ..., "statistics": {...}}}`. It raises `ParseError` when the text
is not what the tool prints on a run that finished, so that the executor reports the run as errored
(the tool could not judge the hardware) instead of inventing metrics. A value a tool could not measure
is left out rather than guessed: the evaluator then fails the rule that needed it.
"""

from __future__ import annotations

import statistics as _stats
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

__all__ = [
    "FACT_PARSERS",
    "PARSER_NAMES",
    "Metrics",
    "ParseError",
    "Parser",
    "parser_for",
    "summarise",
]

Metrics = dict[str, dict[str, Any]]


class Parser(Protocol):
    """Tool output (and the run's parameters, for parsers that need them) → metrics, or for the hardware
    readers (`FACT_PARSERS`) → the facts they read (an inventory, the adapters, the DMI fields)."""

    def __call__(self, text: str, parameters: Mapping[str, Any] | None = None, /) -> dict[str, Any]: ...


PARSER_NAMES: tuple[str, ...] = (
    "dcgm-diag-json",
    "nccl-all-reduce",
    "nvbandwidth",
    "nvidia-smi-csv:<fields>",
    "nvidia-smi-xml-health",
    "kernel-log-xid",
    "nvidia-smi-xml-inventory",
    "amd-smi-static",
    "amd-smi-metric",
    "rvs",
    "rccl-tests",
    "transferbench",
    "kernel-log-amdgpu",
    "ibstat",
    "dmi-id",
)

#: Parsers that return hardware facts rather than metrics: the inventory's readers, never a test's parser.
FACT_PARSERS: frozenset[str] = frozenset({"nvidia-smi-xml-inventory", "amd-smi-static", "ibstat", "dmi-id"})


class ParseError(ValueError):
    """The text is not output this parser understands (or the tool reported that it failed)."""


def summarise(values: Sequence[float], *, with_sum: bool = False, with_median: bool = False) -> dict[str, float]:
    """min/max/mean (and optionally sum and p50) of per-component values, rounded to hide float noise."""
    if not values:
        raise ValueError("no values to summarise")
    summary: dict[str, float] = {
        "min": min(values),
        "max": max(values),
        "mean": round(_stats.fmean(values), 6),
    }
    if with_sum:
        summary["sum"] = round(sum(values), 6)
    if with_median:
        summary["p50"] = round(_stats.median(values), 6)
    return summary


def per_gpu_counters(per_gpu: Mapping[str, Mapping[str, int | None]], gpu_count: int) -> Metrics:
    """A health tool's counters as metrics: each one's per-GPU values in `statistics` (keyed by bus
    id) and their sum as `value`, left out when a GPU does not keep the count (fail closed); with
    `gpu_count`. One shape for every vendor's health parser."""
    metrics: Metrics = {"gpu_count": {"value": gpu_count}}
    for name, values in per_gpu.items():
        entry: dict[str, Any] = {"statistics": dict(values)}
        if all(value is not None for value in values.values()):
            entry["value"] = sum(value for value in values.values() if value is not None)
        metrics[name] = entry
    return metrics


def parser_for(name: str) -> Parser:
    """The parser configured by `name` (one of `PARSER_NAMES`); `ValueError` for an unknown name.

    `nvidia-smi-csv:<fields>` carries the queried fields because a `--format=csv,noheader` output does not
    name its columns. `nccl-all-reduce` reads the run parameter `collective` (default `all_reduce`) when a
    log holds several collectives.
    """
    from fleet_agent.parsers import (
        amd_smi,
        dcgm,
        dmi,
        ibstat,
        kernel_log,
        kernel_log_amdgpu,
        nccl,
        nvbandwidth,
        nvidia_smi,
        nvidia_smi_xml,
        rvs,
        transferbench,
    )

    with_parameters: dict[str, Parser] = {
        "nccl-all-reduce": nccl.parse_all_reduce,
        "nvidia-smi-xml-health": nvidia_smi_xml.parse_health,
        "kernel-log-xid": kernel_log.parse_xid_metrics,
        "ibstat": ibstat.parse_ibstat,
        "dmi-id": dmi.parse_dmi,
        "amd-smi-metric": amd_smi.parse_amd_health,
        "rvs": rvs.parse_rvs,
        "rccl-tests": nccl.parse_rccl,
        "transferbench": transferbench.parse_a2a,
        "kernel-log-amdgpu": kernel_log_amdgpu.parse_amdgpu_metrics,
    }
    if name in with_parameters:
        return with_parameters[name]
    simple = {
        "dcgm-diag-json": dcgm.parse_diag_json,
        "nvbandwidth": nvbandwidth.parse,
        "nvidia-smi-xml-inventory": nvidia_smi_xml.parse_inventory,
        "amd-smi-static": amd_smi.parse_amd_inventory,
    }.get(name)
    if simple is not None:
        return _ignoring_parameters(simple)
    prefix = "nvidia-smi-csv:"
    if name.startswith(prefix):
        fields = [field.strip() for field in name[len(prefix) :].split(",") if field.strip()]
        if not fields:
            raise ValueError("nvidia-smi-csv needs the queried fields, e.g. nvidia-smi-csv:index,temperature.gpu")
        return _ignoring_parameters(lambda text: nvidia_smi.parse_query_csv(text, fields))
    raise ValueError(f"unknown parser {name!r}; known: {', '.join(PARSER_NAMES)}")


def _ignoring_parameters(parse: Callable[[str], dict[str, Any]]) -> Parser:
    def parser(text: str, parameters: Mapping[str, Any] | None = None, /) -> dict[str, Any]:
        return parse(text)

    return parser
