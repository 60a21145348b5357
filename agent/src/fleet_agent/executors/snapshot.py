"""A device's GPU health counters at one moment (ECC, row remaps, throttle state), and its InfiniBand ports' error
counters: what the job's start reads and the `health-window` test compares with what it reads at the end. Its own
module so that `base` (the run it travels in) and `hardware` (which reads it) both import it and neither imports the
other."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from fleet_agent.parsers import Metrics

__all__ = ["FabricSnapshot", "HealthSnapshot"]


@dataclass(frozen=True)
class HealthSnapshot:
    """The GPU vendor's health metrics at one moment, or why they could not be read; `counters` names the
    metrics `values` reports (the vendor's health counters; by default every metric but `gpu_count`)."""

    at: datetime
    metrics: Metrics | None
    problem: str | None = None
    counters: tuple[str, ...] = ()

    def values(self) -> dict[str, Any]:
        """metric → value (None where a GPU did not report it), the form `health.ecc` carries."""
        metrics = self.metrics or {}
        names = self.counters or tuple(name for name in metrics if name != "gpu_count")
        return {name: metrics.get(name, {}).get("value") for name in names}


@dataclass(frozen=True)
class FabricSnapshot:
    """The device's InfiniBand ports' error counters at one moment (`fleet_agent.parsers.ib_counters`: `{source,
    ports}`), or why they could not be read; `ports` is None when no `ib_counters` reading is configured."""

    at: datetime
    ports: dict[str, Any] | None
    problem: str | None = None
    source: str | None = None
