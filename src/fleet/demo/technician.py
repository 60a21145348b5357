"""The demo's technician's rounds: a device that waited `repair_after` seconds in `needs_repair`
gets its faulty GPU swapped (`fleet.demo.story.Technician`) and the repair is recorded through the
service the API and the repair form use (it moves the device back to burn-in and dispatches its
re-burn-in). Everything else an operator used to do here — rerunning what has not passed, isolating
the culprit of a collective that fails while its members pass alone, waiting for repairs — is the
product's bring-up autopilot's now (`fleet.autopilot`, docs/autopilot.md), which the demo turns on."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import timedelta

from django.utils import timezone

from fleet.burnin.reruns.service import DispatchOutcome
from fleet.core.exceptions import FleetError
from fleet.demo.story import Technician
from fleet.lifecycle.selectors import repair_entries
from fleet.repairs.services import repair_record
from fleet_rules.explanations import SKIP_EXPLANATIONS
from fleet_rules.vocabulary import DeviceState, RepairRerun, WorkflowName

log = logging.getLogger("fleet.demo")

ACTOR = "demo technician"


@dataclass
class RepairRounds:
    """The technician's round every few seconds: the repairs due, swapped and recorded."""

    technician: Technician
    repair_after: float  # seconds a device waits in needs_repair before the technician comes

    def record_repairs(self) -> None:
        due = timezone.now() - timedelta(seconds=self.repair_after)
        entered = (
            repair_entries()
            .filter(device__state=DeviceState.NEEDS_REPAIR, at__lte=due)
            # Not while a job still runs on it (a device goes to repair when a result is judged,
            # while its job may run its next test): the hardware that job reads is the old one.
            .exclude(device__job_devices__active=True)
            .select_related("device__site", "device__satellite")
            .order_by("device_id", "-at", "-id")
            .distinct("device_id")
        )
        for change in entered:
            device = change.device
            part = self.technician.swap_gpu(device)
            try:
                recorded = repair_record(
                    device_id=device.id,
                    summary=f"demo technician: swapped GPU {part['slot']} ({change.reason})",
                    parts=[part],
                    rerun=RepairRerun.ALL,
                    actor=ACTOR,
                )
            except FleetError as exc:  # moved meanwhile (an operator on the dashboard): leave it
                log.info("repair of %s/%s not recorded: %s", device.site.slug, device.hostname, exc.detail)
                continue
            skips = recorded.dispatch.plan.skips
            log.info(
                "repair recorded %s/%s: swapped GPU %s (serial %s → %s); burning in again (%s)",
                device.site.slug,
                device.hostname,
                part["slot"],
                part["removed_serial"],
                part["installed_serial"],
                _jobs_phrase(recorded.dispatch)
                if recorded.repair.job_ids or not skips
                else f"not dispatched yet: {skips[0].requirement_name}: {SKIP_EXPLANATIONS[skips[0].reason]}",
            )


def _jobs_phrase(outcome: DispatchOutcome) -> str:
    """What a dispatch created, in words a person reads right: "3 jobs: 2 single-device jobs, 1
    collective on rack-a02 (4 devices)"."""
    jobs = outcome.created_jobs
    single = [j for j in jobs if j.workflow_name != WorkflowName.MULTI_NODE_COLLECTIVE]
    collectives = [j for j in jobs if j.workflow_name == WorkflowName.MULTI_NODE_COLLECTIVE]
    parts = []
    if single:
        parts.append(f"{len(single)} single-device job{'s' if len(single) != 1 else ''}")
    for job in collectives:
        label = job.topology.label if job.topology is not None else "a cohort"
        parts.append(f"1 collective on {label} ({len(job.device_ids)} devices)")
    total = len(jobs)
    return f"{total} job{'s' if total != 1 else ''}: {', '.join(parts)}" if parts else "no job"
