"""The demo's lifecycle story: what the service does to devices, told once per step, and what the
demo's operator and technician do about the devices that need repair.

Each state change is read from the lifecycle's history (newest after the last one told) and said in
one line. A device that has waited in `needs_repair` for `repair_after` seconds is fixed by the
simulated technician (the simulated hardware's log, in its agent's state directory, clears its
fault) and its repair is recorded through the same service as the API's repair record, which moves
it back to burn-in and dispatches its re-burn-in; it passes, is certified and becomes accepted."""

from __future__ import annotations

import hashlib
import json
import logging
import os
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from uuid import UUID

from django.db.models import Q
from django.utils import timezone

from fleet.core.exceptions import FleetError
from fleet.lifecycle.models import DeviceStateChange
from fleet.lifecycle.selectors import repair_entries
from fleet.repairs.services import repair_record
from fleet_agent.executors.simulated import SIMULATED_REPAIRS
from fleet_rules.explanations import SKIP_EXPLANATIONS, STATE_SIGNS
from fleet_rules.vocabulary import DeviceState, RepairRerun, TransitionCause

log = logging.getLogger("fleet.demo")

#: At most this many lines a pass (the rest are told on the next).
LINES_PER_PASS = 40


@dataclass
class LifecycleStory:
    agents_dir: Path  # <agents_dir>/<site>/<satellite>/ is each agent's state directory
    repair_after: float  # seconds a device waits in needs_repair before the technician comes
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

    def repair_the_waiting(self) -> None:
        """The technician fixes the devices that have waited long enough; the operator records it."""
        due = timezone.now() - timedelta(seconds=self.repair_after)
        entered = (
            repair_entries()
            .filter(device__state=DeviceState.NEEDS_REPAIR, at__lte=due)
            .select_related("device__site", "device__satellite")
            .order_by("device_id", "-at", "-id")
            .distinct("device_id")
        )
        for change in entered:
            device = change.device
            slot = hashlib.sha256(str(device.id).encode()).digest()[0] % 8
            self.swap_part(device.site.slug, device.satellite.name, device.id)
            part = {
                "kind": "gpu",
                "slot": str(slot),
                "removed_serial": f"{device.serial}-G{slot}",
                "installed_serial": f"{device.serial}-G{slot}-R",
            }
            try:
                recorded = repair_record(
                    device_id=device.id,
                    summary=f"demo technician: swapped GPU {slot} ({change.reason})",
                    parts=[part],
                    rerun=RepairRerun.ALL,
                    actor="demo operator",
                )
            except FleetError as exc:  # moved meanwhile (an operator on the dashboard): leave it
                log.info("repair of %s/%s not recorded: %s", device.site.slug, device.hostname, exc.detail)
                continue
            skips = recorded.dispatch.plan.skips
            log.info(
                "repair recorded %s/%s: swapped GPU %s; burning in again (%s)",
                device.site.slug,
                device.hostname,
                slot,
                f"{len(recorded.repair.job_ids)} job(s) dispatched"
                if recorded.repair.job_ids or not skips
                else f"not dispatched yet: {skips[0].requirement_name}: {SKIP_EXPLANATIONS[skips[0].reason]}",
            )

    def swap_part(self, site: str, satellite: str, device_id: UUID) -> None:
        """The simulated hardware of this device no longer has its fault (written whole, then renamed:
        the agent never reads half a log)."""
        path = self.agents_dir / site / satellite / SIMULATED_REPAIRS
        path.parent.mkdir(parents=True, exist_ok=True)
        try:
            repaired = set(json.loads(path.read_text()))
        except (OSError, ValueError):
            repaired = set()
        repaired.add(str(device_id))
        partial = path.with_suffix(".tmp")
        partial.write_text(json.dumps(sorted(repaired)))
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
