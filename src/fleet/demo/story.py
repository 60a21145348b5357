"""The demo's lifecycle story and its technician.

`LifecycleStory` says each state change once, read from the lifecycle's history (newest after the
last one told). `Technician` is the person at the rack: for a device that waits for repair it swaps
the faulty GPU in the simulated hardware — the agent's state directory holds the technician's log
(the fault is gone) and the swapped slot (the GPU reports a new serial) — and says what it swapped,
serials as the hardware reports them, so that the repair the demo's technician records
(`fleet.demo.technician`) matches what the next inventory reads."""

from __future__ import annotations

import hashlib
import json
import logging
import os
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any
from uuid import UUID

from django.db.models import Q

from fleet.inventory.models import Device
from fleet.lifecycle.models import DeviceStateChange
from fleet_agent.executors.simulated import RESOURCE_CLASSES, SIMULATED_REPAIRS
from fleet_agent.executors.simulated_hardware import SIMULATED_SWAPS, gpu_serial
from fleet_rules.explanations import STATE_SIGNS
from fleet_rules.vocabulary import DeviceState, TransitionCause

log = logging.getLogger("fleet.demo")

#: At most this many lines a pass (the rest are told on the next).
LINES_PER_PASS = 40


@dataclass
class LifecycleStory:
    told_at: datetime | None = None
    told_id: UUID | None = None

    def tell(self) -> None:
        """Say each state change once, oldest first."""
        changes = DeviceStateChange.objects.select_related("device__site").order_by("at", "id")
        if self.told_at is not None:
            changes = changes.filter(Q(at__gt=self.told_at) | Q(at=self.told_at, id__gt=self.told_id))
        for change in changes[:LINES_PER_PASS]:
            self.told_at, self.told_id = change.at, change.id
            log.info("%s", _line(change))


@dataclass(frozen=True)
class Technician:
    """Swaps parts in the simulated hardware of `<agents_dir>/<site>/<satellite>/`."""

    agents_dir: Path

    def swap_gpu(self, device: Device) -> dict[str, Any]:
        """Swap the device's faulty GPU: the simulated executor's log of repairs (its faults, fabric
        fault included, are gone) and of swapped slots (the slot reports its next board). Returns
        the part as a repair records it, with the serials the hardware reports before and after."""
        state = self.agents_dir / device.site.slug / device.satellite.name
        hardware = RESOURCE_CLASSES.get(device.resource_class)
        slot = hashlib.sha256(device.hostname.encode()).digest()[0] % (hardware.gpus if hardware else 8)
        swaps = _read_json(state / SIMULATED_SWAPS, {})
        before = sum(1 for index in swaps.get(device.hostname, []) if index == slot)
        swaps.setdefault(device.hostname, []).append(slot)
        repaired = set(_read_json(state / SIMULATED_REPAIRS, []))
        repaired.add(device.hostname)
        _write_json(state / SIMULATED_SWAPS, swaps)
        _write_json(state / SIMULATED_REPAIRS, sorted(repaired))
        return {
            "kind": "gpu",
            "slot": str(slot),
            "removed_serial": gpu_serial(str(device.id), slot, before),
            "installed_serial": gpu_serial(str(device.id), slot, before + 1),
        }


def _read_json(path: Path, empty: Any) -> Any:
    try:
        value = json.loads(path.read_text())
    except (OSError, ValueError):
        return empty
    return value if isinstance(value, type(empty)) else empty


def _write_json(path: Path, value: Any) -> None:
    """Written whole, then renamed: the agent never reads half a log."""
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_suffix(".tmp")
    partial.write_text(json.dumps(value))
    os.replace(partial, path)


def _line(change: DeviceStateChange) -> str:
    device = change.device
    where = f"{device.site.slug}/{device.hostname}"
    word = STATE_SIGNS[DeviceState(change.to_state)][1]
    if change.held:
        return f"held by the circuit breaker {where}: would go to {word} ({change.reason})"
    if change.to_state == DeviceState.NEEDS_REPAIR:
        return f"needs repair {where}: {change.reason} — /sites/{device.site.slug}/repairs/"
    if change.cause == TransitionCause.REPAIR:
        return f"repaired {where}: back to {word}"
    if change.cause == TransitionCause.CERTIFICATE_ISSUED:
        return f"accepted {where}: its certificate was issued"
    if change.cause == TransitionCause.CERTIFICATE_SUPERSEDED:
        return f"back to {word} {where}: {change.reason}"
    return f"{word} {where}: {change.cause} {change.reason}".rstrip()
