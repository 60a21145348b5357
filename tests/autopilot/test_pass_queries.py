"""A pass costs the same number of statements at 100 and at 10,000 devices (facts loaded in a fixed
number of statements, one dispatch for all it admits): the autopilot of a hall does not slow down
as the hall grows."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from fleet.autopilot.models import AutopilotAction, SiteAutopilot
from fleet.autopilot.services import autopilot_pass
from fleet.inventory.models import Device, TopologyMembership
from fleet.jobs.models import JobDevice
from fleet_rules.vocabulary import DeviceState, WorkflowName
from tests.burnin.sweeps import sweep_service

pytestmark = [pytest.mark.django_db, pytest.mark.slow]


def hall(fleet, slug: str, devices: int):
    site = fleet.site(slug)
    satellite = fleet.satellite(site, "sat-a", workflows=list(WorkflowName.values))
    racks = [fleet.topology(satellite, "rack", f"{slug}-r{r:04d}") for r in range(devices // 8)]
    now = timezone.now()
    made = Device.objects.bulk_create(
        Device(
            site=site,
            satellite=satellite,
            hostname=f"{slug}-n{i:05d}",
            serial=f"{slug}-{i}",
            resource_class="gpu.h200.8x",
            state=DeviceState.BURN_IN,
            enrolled_at=now,
        )
        for i in range(devices)
    )
    TopologyMembership.objects.bulk_create(
        TopologyMembership(device=d, topology=racks[i // 8], unit="rack") for i, d in enumerate(made)
    )
    sweep_service(slug, "sat-a", "gpu.h200.8x", limit=5000)
    SiteAutopilot.objects.create(site=site, enabled=True, max_under_test=16)
    return site


def test_a_pass_costs_the_same_statements_at_100_and_10000_devices(fleet):
    policy = fleet.policy("gpu.h200.8x")
    fleet.requirement(policy, "gpu-diag")
    fleet.profile("gpu.h200.8x", "dcgm-diag", {"level": 2})
    counts = {}
    for slug, size in (("small", 104), ("large", 10_000)):
        site = hall(fleet, slug, size)
        with CaptureQueriesContext(connection) as captured:
            autopilot_pass(site=site, actor="autopilot@test")
        counts[size] = len(captured)
        assert JobDevice.objects.filter(active=True, device__site=site).count() == 16
        assert AutopilotAction.objects.filter(site=site).count() == 1
    assert counts[104] == counts[10_000], counts
