"""`field__among=ids`: the rows of `field__in=ids`, bound as one text value whatever the count."""

from __future__ import annotations

import uuid

import pytest

from fleet.inventory.models import Device, TopologyMembership

pytestmark = pytest.mark.django_db


@pytest.fixture
def devices(fleet):
    satellite = fleet.satellite(fleet.site())
    rack = fleet.topology(satellite)
    return [fleet.device(satellite, topologies=[rack] if i % 2 else []) for i in range(6)]


@pytest.mark.parametrize("pick", [slice(0, 0), slice(0, 1), slice(1, 5), slice(0, 6)])
def test_among_selects_the_rows_in_selects_and_binds_one_parameter(devices, pick):
    wanted = [d.id for d in devices[pick]] + [uuid.uuid4()]  # an id of nothing matches nothing
    among = Device.objects.filter(id__among=wanted)
    assert set(among.values_list("id", flat=True)) == set(
        Device.objects.filter(id__in=wanted).values_list("id", flat=True)
    )
    _, params = among.query.sql_with_params()
    assert len(params) == 1


def test_among_on_a_foreign_key_and_on_an_empty_list(devices):
    members = [d.id for d in devices]
    assert set(TopologyMembership.objects.filter(device_id__among=members).values_list("device_id", flat=True)) == {
        d.id for d in devices[1::2]
    }
    assert not Device.objects.filter(id__among=[]).exists()
