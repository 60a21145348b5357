"""A job's devices (or the service's node states) as the targets tests run on, each with its GPUs' vendor: its
resource class's (docs/agent.md, "GPU vendors").

Who made a class's GPUs comes, in this order, from the agent's configuration (`gpu_vendors`, for a site that pins
it), from the service (each class's policy declares it: `GET /api/v1/satellites/resource-classes/` answers
`gpu_vendors`, asked when a class is met that the agent has not learnt, at most once a minute), from the executor's
own model (the simulation knows its hardware), and else NVIDIA.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

from fleet_agent.executors.base import Target
from fleet_agent.gpus import DEFAULT_GPU_VENDOR, GPU_VENDORS

__all__ = ["GpuVendorBook", "device_target"]

logger = logging.getLogger("fleet_agent.targets")

#: How often the service is asked again about a class it did not know (a policy applied meanwhile).
ASK_AGAIN_S = 60.0


class GpuVendorBook:
    """Who made each resource class's GPUs, as the agent learns it (see the module docstring); call it with a
    class. `ask` returns the service's class → vendor map; its failures are logged, never raised."""

    def __init__(
        self,
        configured: Mapping[str, Any],
        *,
        executor: object = None,
        ask: Callable[[], Mapping[str, str]] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.configured = dict(configured)
        self.modelled: Mapping[str, str] = getattr(executor, "gpu_vendors", {})
        self._ask, self._clock = ask, clock
        self._served: dict[str, str] = {}
        self._asked_at: float | None = None
        self._lock = threading.Lock()

    def __call__(self, resource_class: str) -> str:
        if resource_class in self.configured:
            return str(self.configured[resource_class])
        with self._lock:
            if resource_class not in self._served:
                self._learn()
            served = self._served.get(resource_class)
        return served or self.modelled.get(resource_class) or DEFAULT_GPU_VENDOR

    def _learn(self) -> None:
        now = self._clock()
        if self._ask is None or (self._asked_at is not None and now - self._asked_at < ASK_AGAIN_S):
            return
        self._asked_at = now
        try:
            answer = self._ask()
        except Exception as exc:  # the service unreachable: the next class met asks again, later
            logger.warning("could not learn the resource classes' GPU vendors from the service: %s", exc)
            return
        self._served.update({str(k): str(v) for k, v in answer.items() if str(v) in GPU_VENDORS})


def device_target(device: Mapping[str, Any], vendor_of: Callable[[str], str]) -> Target:
    """A job's device (`id`) or a node state (`device_id`) as a target, with the vendor of its class."""
    resource_class = str(device.get("resource_class") or "")
    device_id = device.get("id") or device.get("device_id")
    return Target(str(device_id), str(device["hostname"]), resource_class, vendor_of(resource_class))
