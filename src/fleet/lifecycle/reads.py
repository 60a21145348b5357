"""What the dashboard's device page shows of the lifecycle: the newest state changes and repairs
(two queries, each bounded)."""

from __future__ import annotations

from dataclasses import dataclass
from uuid import UUID

from fleet.lifecycle.models import DeviceStateChange, Repair
from fleet_rules.vocabulary import DeviceState

HISTORY_SHOWN = 20
REPAIRS_SHOWN = 10


@dataclass(frozen=True)
class DeviceLifecycle:
    history: list[DeviceStateChange]  # newest first, at most HISTORY_SHOWN
    more_history: bool
    repairs: list[Repair]  # newest first, at most REPAIRS_SHOWN

    @property
    def needs_repair_since(self) -> DeviceStateChange | None:
        """The change that sent the device to repair, when that is where it is."""
        entered = next((c for c in self.history if not c.held), None)
        return entered if entered is not None and entered.to_state == DeviceState.NEEDS_REPAIR else None


def device_lifecycle(device_id: UUID) -> DeviceLifecycle:
    history = list(DeviceStateChange.objects.filter(device_id=device_id)[: HISTORY_SHOWN + 1])
    repairs = list(Repair.objects.filter(device_id=device_id)[:REPAIRS_SHOWN])
    return DeviceLifecycle(history[:HISTORY_SHOWN], len(history) > HISTORY_SHOWN, repairs)
