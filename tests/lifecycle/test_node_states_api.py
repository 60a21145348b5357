"""`GET /api/v1/satellites/node-states/`: what a satellite's node gate reads — its devices' lifecycle
states and, in needs_repair, why (from the lifecycle history). Satellites only, each for itself;
keyset-paginated; a constant number of queries per page."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from fleet.lifecycle.services import device_transition
from fleet_rules.vocabulary import DeviceState, Mover
from tests.lifecycle.test_api import World

URL = "/api/v1/satellites/node-states/"
SATELLITE = ["fleet:read"]
QUERY = {"site_slug": "lon-1", "satellite_name": "sat-a"}


@pytest.fixture
def world(fleet):
    return World(fleet, devices=4)


def pages(client, limit: int, satellite: str = "sat-a") -> list[dict]:
    found, cursor = [], None
    while True:
        query = {"site_slug": "lon-1", "satellite_name": satellite, "limit": limit}
        response = client.get(URL, query | ({"cursor": cursor} if cursor else {}))
        assert response.status_code == 200, response.content
        body = response.json()
        found.extend(body["results"])
        cursor = body["next_cursor"]
        if cursor is None:
            return found


def test_the_satellite_reads_every_device_with_its_state_and_why_it_needs_repair(world, bearer):
    world.fail(world.devices[:1], times=3)  # n00 fails too often: needs_repair
    device_transition(
        device_id=world.devices[1].id, to=DeviceState.DECOMMISSIONED, mover=Mover.OPERATOR, actor="user:x"
    )
    client = bearer(SATELLITE, satellite=world.satellite)

    found = pages(client, limit=500)

    assert [(d["hostname"], d["state"]) for d in found] == [
        ("n00", "needs_repair"),
        ("n01", "decommissioned"),
        ("n02", "burn_in"),
        ("n03", "burn_in"),
    ]
    assert found[0]["why"].startswith("gpu-diag failed 3 times"), found[0]
    assert found[0]["since"] is not None
    assert [(d["why"], d["since"]) for d in found[1:]] == [("", None)] * 3
    assert found[0]["device_id"] == str(world.devices[0].id)


def test_pages_follow_each_other_by_hostname_without_gaps_or_repeats(world, bearer, fleet):
    for i in range(4, 9):
        fleet.device(world.satellite, hostname=f"n{i:02d}")
    other = fleet.satellite(world.site, "sat-b")
    fleet.device(other, hostname="n50")  # another satellite's device: not in sat-a's pages
    client = bearer(SATELLITE, satellite=world.satellite)

    found = pages(client, limit=2)

    assert [d["hostname"] for d in found] == [f"n{i:02d}" for i in range(9)]


def test_a_cursor_tampered_with_or_of_another_satellite_is_a_400_on_cursor(world, bearer, fleet):
    other = fleet.satellite(world.site, "sat-b")
    for i in range(3):
        fleet.device(other, hostname=f"b{i}")
    theirs = bearer(SATELLITE, satellite=other, name="sat-b-client").get(
        URL, {"site_slug": "lon-1", "satellite_name": "sat-b", "limit": 1}
    )
    client = bearer(SATELLITE, satellite=world.satellite)
    mine = client.get(URL, QUERY | {"limit": 1}).json()["next_cursor"]

    for cursor in (theirs.json()["next_cursor"], mine[:-3] + "abc"):
        response = client.get(URL, QUERY | {"cursor": cursor})
        assert response.status_code == 400, response.content
        assert [e["field"] for e in response.json()["field_errors"]] == ["cursor"]


@pytest.mark.parametrize(
    ("query", "field"),
    [({"limit": 0}, "limit"), ({"limit": 501}, "limit"), ({"site_slug": "nowhere"}, "site_slug")],
)
def test_bad_input_is_a_400_naming_the_field(world, bearer, query, field):
    response = bearer(SATELLITE, satellite=world.satellite).get(URL, QUERY | query)
    assert response.status_code == 400, response.content
    assert [e["field"] for e in response.json()["field_errors"]] == [field]


def test_people_operator_clients_other_satellites_and_other_sites_are_refused(
    world, bearer, fleet, client, user_factory
):
    sibling = fleet.satellite(world.site, "sat-b")
    elsewhere = fleet.satellite(fleet.site("ams-1"), "sat-c")
    callers = {
        "operator client": bearer(["fleet:read", "job:create"]),
        "sibling satellite acting as sat-a": bearer(SATELLITE, satellite=sibling, name="sibling"),
        "other site's satellite": bearer(SATELLITE, satellite=elsewhere, name="elsewhere"),
    }
    client.force_login(user_factory(username="boss", superuser=True))
    refused = {name: c.get(URL, QUERY) for name, c in callers.items()} | {"superuser session": client.get(URL, QUERY)}

    assert {name: (r.status_code, r.json()["code"]) for name, r in refused.items()} == dict.fromkeys(
        refused, (403, "permission_denied")
    )


def _queries(client, satellite_name: str) -> int:
    with CaptureQueriesContext(connection) as captured:
        response = client.get(URL, {"site_slug": "lon-1", "satellite_name": satellite_name, "limit": 500})
    assert response.status_code == 200, response.content
    return len(captured)


def test_a_page_takes_the_same_queries_whatever_its_size(world, bearer, fleet):
    small = world.satellite
    large = fleet.satellite(world.site, "sat-large")
    for i in range(60):
        device = fleet.device(large, hostname=f"l{i:03d}")
        if i % 10 == 0:
            device_transition(device_id=device.id, to=DeviceState.NEEDS_REPAIR, mover=Mover.OPERATOR, actor="user:x")
    world.fail(world.devices[:2], times=3)
    small_client = bearer(SATELLITE, satellite=small)
    large_client = bearer(SATELLITE, satellite=large, name="large")
    large_states = pages(large_client, limit=500, satellite="sat-large")
    assert len(large_states) == 60 and len(pages(small_client, limit=500)) == 4

    assert _queries(small_client, "sat-a") == _queries(large_client, "sat-large")
