"""A job's devices (or the service's node states) as the targets tests run on, each with its GPUs' vendor: its
resource class's, as the agent's `gpu_vendors` mirrors the fleet file's `gpu_vendor` (docs/agent.md)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from fleet_agent.executors.base import Target
from fleet_agent.gpus import DEFAULT_GPU_VENDOR

__all__ = ["class_vendor", "device_target", "vendor_lookup"]


def class_vendor(resource_class: str, *, configured: Mapping[str, Any], modelled: Mapping[str, str]) -> str:
    """Who made the class's GPUs: the configuration's `gpu_vendors`, else the executor's own model (the simulation
    knows its hardware), else NVIDIA."""
    return str(configured.get(resource_class) or modelled.get(resource_class) or DEFAULT_GPU_VENDOR)


def vendor_lookup(configured: Mapping[str, Any], executor: object) -> Callable[[str], str]:
    """`class_vendor` for an agent: its configuration's `gpu_vendors`, then its executor's model (`gpu_vendors`)."""
    modelled: Mapping[str, str] = getattr(executor, "gpu_vendors", {})
    return lambda resource_class: class_vendor(resource_class, configured=configured, modelled=modelled)


def device_target(device: Mapping[str, Any], vendor_of: Callable[[str], str]) -> Target:
    """A job's device (`id`) or a node state (`device_id`) as a target, with the vendor of its class."""
    resource_class = str(device.get("resource_class") or "")
    device_id = device.get("id") or device.get("device_id")
    return Target(str(device_id), str(device["hostname"]), resource_class, vendor_of(resource_class))
