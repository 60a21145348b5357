"""The autopilot's gauges at scrape time: per site, devices under test against the limit, waiting
devices, active, the last action; the same statements for one site and for five."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone
from prometheus_client.parser import text_string_to_metric_families

from fleet.autopilot.metrics import autopilot_gauges
from fleet.autopilot.models import AutopilotAction, SiteAutopilot
from fleet_rules.vocabulary import AutopilotActionKind

pytestmark = pytest.mark.django_db


def autopilot_site(fleet, slug: str, devices: int, paused: bool = False):
    site = fleet.site(slug)
    satellite = fleet.satellite(site, "sat-a")
    for i in range(devices):
        fleet.device(satellite, hostname=f"{slug}-n{i}")
    SiteAutopilot.objects.create(
        site=site, enabled=True, max_under_test=12, paused_at=timezone.now() if paused else None
    )
    AutopilotAction.objects.create(site=site, at=timezone.now(), kind=AutopilotActionKind.DISPATCH, reason="x")
    return site


def statements() -> tuple[int, dict]:
    with CaptureQueriesContext(connection) as captured:
        families = list(autopilot_gauges())
    values = {(f.name, s.labels.get("site")): s.value for f in families for s in f.samples}
    return len(captured), values


def test_the_gauges_say_each_site_s_state_in_the_same_statements_for_one_site_and_five(fleet):
    autopilot_site(fleet, "lon-1", 3)
    one, values = statements()
    assert values[("fleet_autopilot_max_under_test", "lon-1")] == 12
    assert values[("fleet_autopilot_devices_waiting", "lon-1")] == 3
    assert values[("fleet_autopilot_active", "lon-1")] == 1
    assert values[("fleet_autopilot_last_action_timestamp_seconds", "lon-1")] > 0
    for i in range(4):
        autopilot_site(fleet, f"par-{i}", 6, paused=i == 0)
    five, values = statements()
    assert one == five == 3
    assert values[("fleet_autopilot_active", "par-0")] == 0


def test_the_metrics_endpoint_exports_them(fleet, client):
    autopilot_site(fleet, "lon-1", 2)
    text = client.get("/metrics").content.decode()
    names = {f.name for f in text_string_to_metric_families(text)}
    assert {"fleet_autopilot_devices_under_test", "fleet_autopilot_actions"} <= names
