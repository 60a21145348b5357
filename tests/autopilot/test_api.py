"""GET /api/v1/burn-in/sites/{id}/autopilot/: the site's autopilot log, newest first, paginated,
in a constant number of statements whatever its length; another site's log is not readable."""

from __future__ import annotations

from datetime import timedelta
from uuid import uuid4

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from fleet.autopilot.models import AutopilotAction
from fleet_rules.vocabulary import AutopilotActionKind

pytestmark = pytest.mark.django_db


def log(site, n: int) -> None:
    now = timezone.now()
    AutopilotAction.objects.bulk_create(
        AutopilotAction(
            site=site,
            at=now - timedelta(seconds=n - i),
            kind=AutopilotActionKind.DISPATCH,
            reason=f"line {i}",
            device_ids=[str(uuid4())],
            hostnames=[f"n{i:03d}"],
            job_ids=[str(uuid4())],
            actor="autopilot@test",
        )
        for i in range(n)
    )


def test_the_log_is_newest_first_and_paginated(fleet, bearer):
    site = fleet.site("lon-1")
    log(site, 30)
    client = bearer(["fleet:read"])
    first = client.get(f"/api/v1/burn-in/sites/{site.id}/autopilot/?limit=10")
    assert first.status_code == 200, first.content
    body = first.json()
    assert [r["reason"] for r in body["results"]] == [f"line {i}" for i in range(29, 19, -1)]
    assert body["results"][0]["hostnames"] == ["n029"] and body["results"][0]["kind"] == "dispatch"
    second = client.get(body["next"])
    assert [r["reason"] for r in second.json()["results"]][0] == "line 19"


def test_a_page_costs_the_same_statements_for_a_short_and_a_long_log(fleet, bearer):
    client = bearer(["fleet:read"])
    counts = []
    for n, slug in ((3, "lon-1"), (300, "par-1")):
        site = fleet.site(slug)
        log(site, n)
        with CaptureQueriesContext(connection) as captured:
            response = client.get(f"/api/v1/burn-in/sites/{site.id}/autopilot/?limit=50")
        assert response.status_code == 200
        counts.append(len(captured))
    assert counts[0] == counts[1], counts


def test_an_unknown_site_is_404_and_a_missing_scope_403(fleet, bearer):
    assert bearer(["fleet:read"]).get(f"/api/v1/burn-in/sites/{uuid4()}/autopilot/").status_code == 404
    site = fleet.site("lon-1")
    assert bearer(["job:create"]).get(f"/api/v1/burn-in/sites/{site.id}/autopilot/").status_code == 403
