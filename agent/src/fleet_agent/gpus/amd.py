"""AMD Instinct GPUs: `amd-smi static --json` answers for the GPU inventory, `amd-smi metric --json` for its
health (ECC counts, throttling); the kernel log's events are the amdgpu driver's RAS, reset and ring events."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from fleet_agent.gpus import GpuVendor
from fleet_agent.parsers.amd_smi import AMD_HEALTH_METRICS, parse_amd_health, parse_amd_inventory
from fleet_agent.parsers.kernel_log_amdgpu import amdgpu_metrics, parse_amdgpu_events
from fleet_rules.health_evidence import XidEvent

__all__ = ["AMD"]


def _events(text: str, since: datetime | None, until: datetime | None) -> list[XidEvent]:
    return parse_amdgpu_events(text, since=since, until=until)


def _no_named_reasons(_: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """amd-smi reports throttling as one status, not NVIDIA's named reasons: it is judged as
    `hw_slowdown_seen` from `throttle_active`."""
    return []


AMD = GpuVendor(
    name="amd",
    tool="amd-smi",
    parse_inventory=parse_amd_inventory,
    parse_health=parse_amd_health,
    health_counters=AMD_HEALTH_METRICS,
    ecc_uncorrected="ecc_uncorrected",
    slowdown="throttle_active",
    throttle_reasons=_no_named_reasons,
    kernel_events=_events,
    kernel_metrics=amdgpu_metrics,
    health_from_inventory=False,
)
