"""NVIDIA GPUs: `nvidia-smi -q -x` answers for both the GPU inventory and its health; the kernel log's events
are the driver's Xids and the NVSwitches' SXids."""

from __future__ import annotations

from datetime import datetime

from fleet_agent.gpus import GpuVendor
from fleet_agent.parsers.kernel_log import parse_xid_events, xid_metrics
from fleet_agent.parsers.nvidia_smi_xml import HEALTH_METRICS, parse_health, parse_inventory, throttle_reasons_active
from fleet_rules.health_evidence import XidEvent

__all__ = ["NVIDIA"]


def _events(text: str, since: datetime | None, until: datetime | None) -> list[XidEvent]:
    return parse_xid_events(text, since=since, until=until)


NVIDIA = GpuVendor(
    name="nvidia",
    tool="nvidia-smi",
    parse_inventory=parse_inventory,
    parse_health=parse_health,
    health_counters=HEALTH_METRICS,
    ecc_uncorrected="ecc_uncorrected_aggregate",
    slowdown="hw_slowdown_active",
    throttle_reasons=throttle_reasons_active,
    kernel_events=_events,
    kernel_metrics=xid_metrics,
    health_from_inventory=True,
)
