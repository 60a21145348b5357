"""Issue 37: the rest of the company hears an operator pause and resume a site's autopilot — an
event each, written in the pause's own transaction (a refused pause writes none)."""

from __future__ import annotations

import pytest

from fleet.autopilot.services import AlreadyPaused, autopilot_pause, autopilot_resume
from fleet.events.models import Event
from fleet_rules.vocabulary import EventType
from tests.autopilot.test_pass import Hall


def test_a_pause_and_a_resume_are_each_an_event_and_a_refused_pause_is_none(fleet):
    hall = Hall(fleet)
    slug = hall.site.slug
    autopilot_pause(site=hall.site, actor="user:ops", reason="power work in hall 2")
    with pytest.raises(AlreadyPaused):
        autopilot_pause(site=hall.site, actor="user:ops", reason="again")
    autopilot_resume(site=hall.site, actor="user:ops")

    events = list(Event.objects.filter(type__startswith="com.fleet-burnin.autopilot.").order_by("time", "type"))
    assert [e.type for e in events] == [EventType.AUTOPILOT_PAUSED, EventType.AUTOPILOT_RESUMED]
    paused, resumed = events
    assert paused.subject == f"sites/{slug}/autopilot" and paused.site_id == hall.site.id
    assert paused.data["reason"] == "power work in hall 2" and paused.data["actor"] == "user:ops"
    assert paused.data["links"] == {"dashboard": f"/sites/{slug}/autopilot/"}
    assert resumed.data["actor"] == "user:ops" and resumed.data["site"] == slug
