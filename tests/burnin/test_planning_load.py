"""What rerun planning reads: the selected devices' facts, the cohorts of their topologies as the
database finds them, and projection rows (with whether each decided its target's latest execution)
only of what is judged."""

from __future__ import annotations

import pytest

from fleet.burnin.reruns.load import _devices, load_planning_input, lock_involved_devices
from fleet.inventory.models import TopologyMembership
from fleet_rules.planning import cohort_index
from fleet_rules.vocabulary import DeviceState, PlanningMode
from tests.burnin.test_rerun import World

pytestmark = pytest.mark.django_db


def test_the_loaded_cohorts_are_cohort_index_of_every_member(fleet):
    world = World(fleet)
    outsiders = [
        fleet.device(world.satellite, topologies=[world.rack], state=DeviceState.DECOMMISSIONED),
        fleet.device(world.satellite, topologies=[world.rack], enrolled=False),
        fleet.device(world.satellite, "gpu.mi300x.8x", topologies=[world.rack]),
    ]
    pod = fleet.topology(world.satellite, "pod", "pod-1")
    TopologyMembership.objects.create(device=world.devices[0], topology=pod, unit="pod")
    beyond = fleet.device(world.satellite, topologies=[pod])
    fleet.device(world.satellite, topologies=[fleet.topology(world.satellite)])  # no topology of the selection
    for device in world.devices:
        world.result(world.diag, device=device)
    world.result(world.rack_nccl, topology=world.rack)
    world.sweep()
    selected = [world.devices[0].id, world.devices[1].id]

    data = load_planning_input(selected=selected, mode=PlanningMode.NON_PASSING)

    members = {d.id for d in world.devices} | {d.id for d in outsiders} | {beyond.id}
    assert data.cohorts == cohort_index(_devices(list(members)).values())
    assert set(data.cohorts) == {
        ("rack", world.rack.id, "gpu.h200.8x"),
        ("rack", world.rack.id, "gpu.mi300x.8x"),
        ("pod", pod.id, "gpu.h200.8x"),
    }
    assert data.cohorts[("rack", world.rack.id, "gpu.h200.8x")] == tuple(sorted(d.id for d in world.devices))
    assert set(data.devices) == set(selected)
    assert data.devices[world.devices[0].id].topologies == {"rack": world.rack.id, "pod": pod.id}
    judged = {(r.id, d) for r in (world.diag, world.nvbw) for d in selected} | {(world.rack_nccl.id, world.rack.id)}
    assert set(data.progress) == judged  # every target has a row (not_run where nothing ran)
    # Swept: every row decided its target's latest execution (nvbw's: none, as none ran).
    assert {key for key, row in data.progress.items() if not row.decides_latest} == set()
    fleet.execution(world.diag, device=world.devices[1], status="running")  # newer, not swept yet
    behind = load_planning_input(selected=selected, mode=PlanningMode.NON_PASSING).progress
    assert {key for key, row in behind.items() if not row.decides_latest} == {(world.diag.id, selected[1])}
    assert lock_involved_devices(selected) == {d.id for d in world.devices} | {d.id for d in outsiders} | {beyond.id}
