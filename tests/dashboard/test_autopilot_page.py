"""The autopilot page of a site: its state, its limit against devices under test, its log newest
first; an operator pauses (with a reason and a ticked confirmation) and resumes, once per token
whatever the replays; a viewer sees no form and is refused; the site page says who paused and why;
the page costs the same statements for a short and a long log."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from fleet.autopilot.models import AutopilotAction, SiteAutopilot
from fleet_rules.vocabulary import AutopilotActionKind
from tests.dashboard.conftest import OPERATOR, VIEWER

pytestmark = pytest.mark.django_db


def autopilot_site(fleet, slug="lon-1", lines=2):
    site = fleet.site(slug)
    SiteAutopilot.objects.create(site=site, enabled=True, max_under_test=16)
    now = timezone.now()
    AutopilotAction.objects.bulk_create(
        AutopilotAction(
            site=site,
            at=now - timedelta(seconds=lines - i),
            kind=AutopilotActionKind.DISPATCH,
            reason=f"burn-in of 1 device(s): line {i}",
            actor="autopilot@test",
        )
        for i in range(lines)
    )
    return site


def token(page: str, form: str) -> str:
    return re.search(rf'class="confirm {form}">.*?name="token" value="([^"]+)"', page, re.S).group(1)


def test_the_page_shows_the_state_the_limit_and_the_log_newest_first(fleet, person):
    autopilot_site(fleet)
    page = person(VIEWER).get("/sites/lon-1/autopilot/").content.decode()
    assert 'data-state="on"' in page and "of at most <strong>16</strong>" in page
    assert page.index("line 1") < page.index("line 0")
    assert "Pause the autopilot" not in page  # a viewer gets no form


def test_an_operator_pauses_with_a_reason_once_and_resumes(fleet, person):
    autopilot_site(fleet)
    operator = person(OPERATOR)
    page = operator.get("/sites/lon-1/autopilot/").content.decode()
    body = {
        "csrfmiddlewaretoken": operator.cookies["csrftoken"].value,
        "token": token(page, "autopilot-pause"),
        "reason": "cooling work in hall 2",
        "confirm": "on",
    }
    unconfirmed = operator.post("/sites/lon-1/autopilot/pause/", body | {"confirm": ""})
    assert unconfirmed.status_code == 400 and "Tick the confirmation" in unconfirmed.content.decode()
    for _ in range(2):  # a replayed POST is redirected to the first result and pauses nothing twice
        response = operator.post("/sites/lon-1/autopilot/pause/", body)
        assert response.status_code == 303 and response["Location"] == "/sites/lon-1/autopilot/"
    assert AutopilotAction.objects.filter(kind=AutopilotActionKind.PAUSE).count() == 1
    row = SiteAutopilot.objects.get()
    assert row.paused_at is not None and row.pause_reason == "cooling work in hall 2"
    site_page = operator.get("/sites/lon-1/").content.decode()
    assert "⏸ paused by user:person" in site_page and "cooling work in hall 2" in site_page
    page = operator.get("/sites/lon-1/autopilot/").content.decode()
    resume = {
        "csrfmiddlewaretoken": body["csrfmiddlewaretoken"],
        "token": token(page, "autopilot-resume"),
        "confirm": "on",
    }
    assert operator.post("/sites/lon-1/autopilot/resume/", resume).status_code == 303
    assert SiteAutopilot.objects.get().paused_at is None


def test_a_viewer_is_refused_the_pause(fleet, person):
    autopilot_site(fleet)
    viewer = person(VIEWER)
    viewer.get("/sites/lon-1/autopilot/")
    body = {
        "csrfmiddlewaretoken": viewer.cookies["csrftoken"].value,
        "token": "00000000-0000-4000-8000-000000000000",
        "reason": "x",
        "confirm": "on",
    }
    assert viewer.post("/sites/lon-1/autopilot/pause/", body).status_code == 403
    assert SiteAutopilot.objects.get().paused_at is None


def test_the_page_takes_the_same_statements_for_a_short_and_a_long_log(fleet, person):
    client = person(VIEWER)
    counts = []
    for slug, lines in (("lon-1", 2), ("par-1", 200)):
        autopilot_site(fleet, slug, lines)
        with CaptureQueriesContext(connection) as captured:
            assert client.get(f"/sites/{slug}/autopilot/").status_code == 200
        counts.append(len(captured))
    assert counts[0] == counts[1], counts
