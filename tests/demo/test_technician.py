"""The demo's technician never swaps a part of a device a job still holds: a job that started before the device
went to repair reads the old hardware at its start and reports it after, so a swap under it made the repair's
check read "removed … is still reported" (tests/e2e/test_demo.py failed on it, on an H200 node)."""

from __future__ import annotations

from fleet.demo.story import Technician
from fleet.demo.technician import RepairRounds
from fleet.jobs.models import JobDevice
from fleet.jobs.services import JobSpec, job_create
from fleet.lifecycle.models import Repair
from fleet.lifecycle.services import Move, transitions_apply
from fleet_agent.executors.simulated_hardware import SIMULATED_SWAPS
from fleet_rules.vocabulary import DeviceState, Mover, TransitionCause, WorkflowName


def test_the_technician_waits_for_the_job_that_holds_a_device_in_repair(fleet, tmp_path):
    site = fleet.site("lon-1")
    satellite = fleet.satellite(site, "sat-a")
    device = fleet.device(satellite, hostname="a02-n04")
    job = job_create(spec=JobSpec(site.id, satellite.id, WorkflowName.SINGLE_NODE, (device.id,)), requested_by="test")
    transitions_apply([Move(device.id, DeviceState.NEEDS_REPAIR, Mover.OPERATOR, TransitionCause.OPERATOR, "u", "RMA")])
    rounds = RepairRounds(technician=Technician(tmp_path), repair_after=0)
    swaps = tmp_path / "lon-1" / "sat-a" / SIMULATED_SWAPS

    rounds.record_repairs()  # the job that was running when it went to repair still holds it

    assert not Repair.objects.exists() and not swaps.exists()
    JobDevice.objects.filter(job=job).update(active=False)  # the job ended
    rounds.record_repairs()
    assert Repair.objects.filter(device=device).count() == 1 and swaps.exists()
