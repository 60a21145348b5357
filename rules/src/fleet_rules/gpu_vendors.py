"""Which GPU vendor a test, a parser or a health metric belongs to, so that a resource class's policy (and an
agent's commands) never ask one vendor's node for another vendor's tool.

A resource class declares its GPUs' vendor (`gpu_vendor`, NVIDIA when it says nothing). Test names are the
operator's, but the burn-in tools they run are a vendor's: a test named after a tool (`dcgm-diag`, `rvs-stress`,
`rccl-all-reduce`) is that tool's vendor's, whatever follows the tool's name. A test named after no vendor's tool
(`health-window`, `ib-write-bw`, `hbm-bandwidth`) belongs to every vendor. The health window's metrics are read by
the vendor's own tools, so a threshold on `xid_fatal_count` in an AMD class (or on `amdgpu_ras_fatal_count` in an
NVIDIA one) could never be measured: it would fail every device closed, and is refused instead.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from fleet_rules.vocabulary import GpuVendor

__all__ = [
    "DEFAULT_GPU_VENDOR",
    "VENDOR_METRIC_PREFIXES",
    "VENDOR_PARSERS",
    "VENDOR_TOOLS",
    "gpus_in_words",
    "vendor_words",
    "vendor_of_metric",
    "vendor_of_parser",
    "vendor_of_test",
    "wrong_vendor",
]

DEFAULT_GPU_VENDOR = GpuVendor.NVIDIA

#: The burn-in tools of each vendor, as test names start with them (`dcgm-diag`, `rccl-all-reduce-multinode`).
VENDOR_TOOLS: Mapping[GpuVendor, tuple[str, ...]] = {
    GpuVendor.NVIDIA: ("dcgm", "dcgmi", "nccl", "nvbandwidth", "nvidia-smi"),
    GpuVendor.AMD: ("rvs", "rccl", "transferbench", "amd-smi", "rocm-smi"),
}

#: The agent's parsers (`fleet_agent.parsers.PARSER_NAMES`) that read one vendor's tool; the others read anyone's.
VENDOR_PARSERS: Mapping[GpuVendor, frozenset[str]] = {
    GpuVendor.NVIDIA: frozenset(
        {"dcgm-diag-json", "nvbandwidth", "nvidia-smi-xml-health", "nvidia-smi-xml-inventory", "kernel-log-xid"}
    ),
    GpuVendor.AMD: frozenset(
        {"amd-smi-static", "amd-smi-metric", "rvs", "rccl-tests", "transferbench", "kernel-log-amdgpu"}
    ),
}

#: Health-window metrics only one vendor's tools report (the kernel log's Xids and SXids, amdgpu's RAS events).
VENDOR_METRIC_PREFIXES: Mapping[GpuVendor, tuple[str, ...]] = {
    GpuVendor.NVIDIA: ("xid_", "sxid_", "row_remap_"),
    GpuVendor.AMD: ("amdgpu_",),
}


def vendor_of_test(test: str) -> GpuVendor | None:
    """The vendor whose tool the test is named after (`rvs-stress` → AMD), or None for a vendor-neutral test."""
    for vendor, tools in VENDOR_TOOLS.items():
        if any(test == tool or test.startswith(f"{tool}-") for tool in tools):
            return vendor
    return None


def vendor_of_parser(parser: str) -> GpuVendor | None:
    """The vendor whose tool's output the parser reads, or None for a parser of anyone's output."""
    name = parser.split(":", 1)[0]
    if name.startswith("nvidia-smi"):
        return GpuVendor.NVIDIA
    return next((vendor for vendor, parsers in VENDOR_PARSERS.items() if name in parsers), None)


def vendor_of_metric(metric: str) -> GpuVendor | None:
    """The vendor whose tools alone report the metric, or None."""
    return next((vendor for vendor, prefixes in VENDOR_METRIC_PREFIXES.items() if metric.startswith(prefixes)), None)


def wrong_vendor(kind: str, name: str, owner: GpuVendor | None, declared: GpuVendor) -> str | None:
    """Why `name` (a test, parser or metric, as `kind` says) cannot serve a class of `declared` GPUs, or None."""
    if owner is None or owner == declared:
        return None
    return f"{kind} {name!r} is {_LABEL[owner]}'s; this resource class's gpu_vendor is {declared.value}"


_LABEL = {GpuVendor.NVIDIA: "NVIDIA", GpuVendor.AMD: "AMD"}


def vendor_words(vendor: str) -> str:
    """`NVIDIA GPUs`, `AMD GPUs` — how pages name a class's vendor; empty for none (a class without a policy)."""
    known = vendor in GpuVendor.values
    return f"{_LABEL[GpuVendor(vendor)]} GPUs" if known else ""


def gpus_in_words(inventory: Mapping[str, Any] | None) -> str:
    """`8 × AMD Instinct MI300X`: the GPUs an inventory (a fingerprint's) lists, by product name in the order
    first seen; empty when it lists none."""
    counts: dict[str, int] = {}
    gpus = (inventory or {}).get("gpus")
    for gpu in gpus if isinstance(gpus, list) else []:
        name = (gpu.get("product_name") if isinstance(gpu, Mapping) else None) or "unnamed GPU"
        counts[str(name)] = counts.get(str(name), 0) + 1
    return ", ".join(f"{n} × {name}" for name, n in counts.items())
