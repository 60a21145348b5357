"""The rerun selection: one definition of which devices "every failing device", "a rack" and
"these devices" mean, shared by the dashboard's rerun form and `fleet rerun`."""

from __future__ import annotations

from fleet.burnin.reruns.selection import RerunSelection, device_hostnames, selection_devices
from tests.dashboard.conftest import build_site


def _names(device_ids):
    names = device_hostnames(device_ids)
    return [names[d] for d in device_ids]


def test_every_failing_device_is_a_failed_requirement_of_its_own_or_of_its_rack(fleet):
    # given two racks: the first device of each fails hbm-bandwidth, rack a01's collective errored
    world = build_site(fleet, racks=2)
    # when every failing device is selected
    selected = selection_devices(world.site, RerunSelection(all_failed=True))
    # then those, in hostname order: a00-n00 for itself, all of rack a01 through its rack
    assert _names(selected) == ["a00-n00", "a01-n00", "a01-n01", "a01-n02", "a01-n03"]


def test_a_topology_selects_its_members_and_an_unknown_label_none(fleet):
    world = build_site(fleet, racks=2)
    assert _names(selection_devices(world.site, RerunSelection(topology="rack-a00"))) == [
        "a00-n00",
        "a00-n01",
        "a00-n02",
        "a00-n03",
    ]
    assert selection_devices(world.site, RerunSelection(topology="no-such-rack")) == []


def test_named_devices_are_taken_as_named_and_the_first_kind_set_wins(fleet):
    world = build_site(fleet, racks=2)
    named = (world.devices[5].id, world.devices[1].id)
    assert selection_devices(world.site, RerunSelection(devices=named)) == list(named)
    both = RerunSelection(all_failed=True, topology="rack-a00", devices=named)
    assert selection_devices(world.site, both) == selection_devices(world.site, RerunSelection(all_failed=True))
    assert selection_devices(world.site, RerunSelection()) == []
