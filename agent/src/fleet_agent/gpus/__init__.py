"""GPU vendors: what the agent reads about a device's GPUs, in the domain's words, whoever made them.

The agent reads two GPU parts of a device's hardware — its **GPU inventory** (the GPUs' identities, the
fingerprint a certificate binds) and its **GPU health** (ECC counters, throttling: the snapshots a health window
compares) — and the GPU driver's events in the kernel log. Each vendor is one module here that says which tool
answers for each part and which parser reads it; the rest of the agent speaks of `gpu_inventory` and
`gpu_health` only, so a third vendor is a new module and an entry in `GPU_VENDORS`, not an edit across the
agent. A device's vendor is its resource class's (`Target.gpu_vendor`; NVIDIA when nothing says otherwise).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from fleet_agent.parsers import Metrics
from fleet_rules.health_evidence import XidEvent

__all__ = ["DEFAULT_GPU_VENDOR", "GPU_VENDORS", "GpuVendor", "gpu_vendor"]

DEFAULT_GPU_VENDOR = "nvidia"


@dataclass(frozen=True)
class GpuVendor:
    """How one vendor's GPUs are read."""

    name: str  # "nvidia", "amd"
    tool: str  # the tool named in a reading's problem ("nvidia-smi: …", "amd-smi: …")
    parse_inventory: Callable[[str], dict[str, Any]]  # → {driver_version, cuda_version, gpus}
    parse_health: Callable[[str], Metrics]
    health_counters: tuple[str, ...]  # the health metrics `health.ecc` carries before and after
    #: The uncorrected-ECC counter whose growth over a window is `ecc_uncorrected_delta`.
    ecc_uncorrected: str
    #: The health metric whose being active at either end of a window is `hw_slowdown_seen` (None: not read).
    slowdown: str | None
    throttle_reasons: Callable[[Mapping[str, Mapping[str, Any]]], list[str]]
    kernel_events: Callable[[str, datetime | None, datetime | None], list[XidEvent]]
    kernel_metrics: Callable[[list[XidEvent]], Metrics]
    #: One tool reading answers both GPU parts (nvidia-smi -q -x): the job's start reads it once.
    health_from_inventory: bool


def gpu_vendor(name: str | None) -> GpuVendor:
    """The vendor called `name` (NVIDIA for None); `ValueError` names the known ones."""
    vendor = GPU_VENDORS.get(name or DEFAULT_GPU_VENDOR)
    if vendor is None:
        raise ValueError(f"unknown GPU vendor {name!r}; known: {', '.join(sorted(GPU_VENDORS))}")
    return vendor


def _registry() -> dict[str, GpuVendor]:
    from fleet_agent.gpus.amd import AMD
    from fleet_agent.gpus.nvidia import NVIDIA

    return {vendor.name: vendor for vendor in (NVIDIA, AMD)}


GPU_VENDORS: Mapping[str, GpuVendor] = _registry()
