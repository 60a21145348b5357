"""A fatal Xid in a burn-in window's health evidence sends the device to repair at once.

Called by `execution_report` in the report's transaction when the stored health evidence changes
(a report that fails validation writes nothing and moves nothing): the evidence's fatal events
(`fleet_rules.xid`) decide, the lifecycle service moves the device behind the circuit breaker of its
site × resource class (`guarded_repair_moves_apply`: a constant number of statements), and the
history entry's reason names the first fatal event in words. From which states: the table's
(`fleet_rules.lifecycle`, cause `fatal_xid`); a device in service is never pulled (docs/lifecycle.md).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from fleet.burnin.models import TestExecution
from fleet.lifecycle.breakers import Guarded, guarded_repair_moves_apply
from fleet.lifecycle.services import AutomaticMove
from fleet_rules.health_evidence import XidEvent, fatal_events, fatal_reason
from fleet_rules.vocabulary import DeviceState, TransitionCause


def fatal_xid_count(health: Mapping[str, Any] | None) -> int:
    return len(fatal_events(health))


def _event_refs(event: XidEvent) -> dict[str, Any]:
    return {
        "kind": event.kind.value,
        "code": event.code,
        "pci_bus_id": event.pci_bus_id,
        "at": event.at.isoformat().replace("+00:00", "Z") if event.at else None,
    }


def fatal_xid_move(execution: TestExecution) -> AutomaticMove | None:
    """The move to repair this execution's health evidence calls for, if any (pure given the row)."""
    fatal = fatal_events(execution.health)
    if not fatal or execution.device_id is None:
        return None
    return AutomaticMove(
        execution.device_id,
        DeviceState.NEEDS_REPAIR,
        TransitionCause.FATAL_XID,
        fatal_reason(fatal),
        {
            "execution": str(execution.id),
            "requirement": execution.requirement.name,
            "xid": _event_refs(fatal[0]),
            "fatal_events": len(fatal),
        },
    )


def fatal_xids_judge(execution: TestExecution) -> Guarded:
    """Move the execution's device to repair when its health evidence holds a fatal event."""
    move = fatal_xid_move(execution)
    return guarded_repair_moves_apply([move] if move is not None else [])
