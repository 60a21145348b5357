"""Kernel log (`journalctl -k`, `dmesg`) → the amdgpu driver's RAS, reset and ring events (`fleet_rules.amdgpu`).

Real lines of several kernel generations are in `tests/agent/fixtures/amd/kernel_log_amdgpu_*.log`. The driver
prefixes its lines with the device (`amdgpu 0000:c1:00.0: `, often `amdgpu: ` again after it), older ring timeouts
come from the DRM scheduler without a device (`[drm:amdgpu_job_timedout [amdgpu]] *ERROR* ring gfx_0.0.0
timeout, …`: the address is then unknown), and the RAS interrupt carries a CPER record number (`{1}`). Log tool
prefixes and times are read as for Xids (`fleet_agent.parsers.kernel_log`): an event's time only from ISO
stamps. Events are `XidEvent`s of kind `amdgpu` whose code is the event's kind (`AmdgpuEventKind`), so the
service judges them with the same evidence path as a fatal Xid.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from fleet_agent.parsers import Metrics, ParseError
from fleet_agent.parsers.kernel_log import _parameter_time, _timestamp
from fleet_rules.amdgpu import AmdgpuEventKind
from fleet_rules.health_evidence import XidEvent
from fleet_rules.xid import XidKind

__all__ = ["amdgpu_metrics", "parse_amdgpu_events", "parse_amdgpu_metrics"]

_MAX_CHARS = 64 * 1024 * 1024
_DEVICE = re.compile(r"amdgpu (?P<pci>[0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]):")
_ERRORS = r"hardware errors? detected in"
_PATTERNS: tuple[tuple[AmdgpuEventKind, re.Pattern[str]], ...] = (
    (AmdgpuEventKind.FATAL_RAS_INTERRUPT, re.compile(r"uncorrectable hardware error\s*\(ERREVENT_\w+\)\s*detected")),
    (AmdgpuEventKind.UNCORRECTABLE_ECC, re.compile(r"\b\d+ uncorrectable hardware errors? detected in \w+ block")),
    (AmdgpuEventKind.CORRECTABLE_ECC, re.compile(rf"\b\d+ correctable {_ERRORS} (?:total in )?\w+ block")),
    (AmdgpuEventKind.DEFERRED_ECC, re.compile(r"\b\d+ deferred hardware errors? detected in \w+ block")),
    (AmdgpuEventKind.POISON_CONSUMED, re.compile(r"poison is consumed by client \d+")),
    (AmdgpuEventKind.BAD_PAGE_THRESHOLD, re.compile(r"Saved bad pages \d+ reaches threshold value")),
    (AmdgpuEventKind.GPU_RESET_FAILED, re.compile(r"GPU reset(?:\(\d+\))? failed|Mode2 reset failed")),
    (AmdgpuEventKind.GPU_RESET, re.compile(r"GPU reset begin")),
    (AmdgpuEventKind.GPU_INIT_FAILED, re.compile(r"Fatal error during GPU init")),
    (AmdgpuEventKind.RING_TIMEOUT, re.compile(r"\bring \S+ timeout\b")),
    (AmdgpuEventKind.ACA_EVENT, re.compile(r"Accelerator Check Architecture events logged")),
)  # fmt: skip
_COUNTED = {
    "amdgpu_gpu_reset_count": (AmdgpuEventKind.GPU_RESET, AmdgpuEventKind.GPU_RESET_FAILED),
    "amdgpu_ecc_uncorrectable_count": (AmdgpuEventKind.UNCORRECTABLE_ECC, AmdgpuEventKind.FATAL_RAS_INTERRUPT),
    "amdgpu_ring_timeout_count": (AmdgpuEventKind.RING_TIMEOUT,),
}


def parse_amdgpu_events(text: str, *, since: datetime | None = None, until: datetime | None = None) -> list[XidEvent]:
    """Every amdgpu event of the log, in log order; events known to fall outside the window are left out."""
    if len(text) > _MAX_CHARS:
        raise ParseError(f"the kernel log is {len(text)} characters; at most {_MAX_CHARS} are read")
    events: list[XidEvent] = []
    for line in text.splitlines():
        if "amdgpu" not in line and "ring " not in line and "Hardware Error" not in line:
            continue
        kind = next((kind for kind, pattern in _PATTERNS if pattern.search(line)), None)
        if kind is None:
            continue
        if kind is AmdgpuEventKind.RING_TIMEOUT and "amdgpu" not in line:
            continue  # another driver's ring
        at = _timestamp(line)
        if at is not None and ((since is not None and at < since) or (until is not None and at > until)):
            continue
        device = _DEVICE.search(line)
        message = line.split("amdgpu:", 1)[-1] if "amdgpu:" in line else line
        events.append(
            XidEvent(
                XidKind.AMDGPU,
                int(kind),
                device.group("pci").lower() if device else None,
                message.strip()[:1000],
                at,
            )
        )
    return events


def parse_amdgpu_metrics(text: str, parameters: Mapping[str, Any] | None = None) -> Metrics:
    """`amdgpu_ras_count`, `amdgpu_ras_fatal_count` (fatal by `fleet_rules.amdgpu`), `amdgpu_gpu_reset_count`,
    `amdgpu_ecc_uncorrectable_count` and `amdgpu_ring_timeout_count`, each with per-PCI-address counts in
    statistics. The run parameters `since`/`until` (ISO 8601) bound the window."""
    parameters = parameters or {}
    events = parse_amdgpu_events(
        text, since=_parameter_time(parameters, "since"), until=_parameter_time(parameters, "until")
    )
    return amdgpu_metrics(events)


def amdgpu_metrics(events: list[XidEvent]) -> Metrics:
    amd = [event for event in events if event.kind is XidKind.AMDGPU]
    chosen = {
        "amdgpu_ras_count": amd,
        "amdgpu_ras_fatal_count": [event for event in amd if event.fatal],
        **{name: [e for e in amd if e.code in codes] for name, codes in _COUNTED.items()},
    }
    metrics: Metrics = {}
    for name, of_name in chosen.items():
        per_address: dict[str, float | None] = {}
        for event in of_name:
            address = event.pci_bus_id or "unknown"
            per_address[address] = (per_address.get(address) or 0) + 1
        metrics[name] = {"value": len(of_name), "statistics": per_address}
    return metrics
