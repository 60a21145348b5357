"""GET /api/v1/burn-in/evaluations/pending/: what a satellite's agent still has to evaluate."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from fleet.burnin.models import EvaluationResult, PendingEvaluation
from tests.builders import result_item

FEED = "/api/v1/burn-in/evaluations/pending/?site_slug=lon-1&satellite_name=sat-a"
SCOPE = ["test-execution:evaluate"]


def ids(response) -> list[str]:
    assert response.status_code == 200, response.content
    return [r["execution_id"] for r in response.json()["results"]]


def test_feed_lists_finished_unevaluated_executions_of_the_satellite_only(bearer, scene, fleet):
    key = fleet.source_key(scene.requirement, scene.site)
    done = fleet.execution(scene.requirement, device=scene.devices[0])
    errored = fleet.execution(scene.requirement, device=scene.devices[1], status="errored", error="xid 79")
    fleet.execution(scene.requirement, device=scene.devices[2], status="running")
    evaluated = fleet.execution(scene.requirement, device=scene.devices[3])
    other = fleet.device(scene.other_satellite)
    fleet.execution(scene.requirement, device=other)
    client = bearer(SCOPE)
    client.post("/api/v1/burn-in/evaluations/results/", {"results": [result_item(evaluated, key)]}, format="json")
    response = client.get(FEED)
    assert ids(response) == [str(done.id), str(errored.id)]
    first = response.json()["results"][0]
    assert first["evaluation_source_key"] == key
    assert first["thresholds"] == [
        {"metric": "diag_failed_tests", "statistic": None, "comparator": "eq", "threshold": 0}
    ]
    assert first["metrics"] == {"diag_failed_tests": {"value": 0}}
    assert response.json()["results"][1]["error"] == "xid 79"
    assert response.json()["next_cursor"] is None


def test_an_evaluation_for_an_older_update_or_key_is_pending_again(bearer, scene, fleet):
    key = fleet.source_key(scene.requirement, scene.site)
    execution = fleet.execution(scene.requirement, device=scene.devices[0])
    client = bearer(SCOPE)
    client.post("/api/v1/burn-in/evaluations/results/", {"results": [result_item(execution, key)]}, format="json")
    assert ids(client.get(FEED)) == []
    fleet.execution(
        scene.requirement,
        device=scene.devices[0],
        execution_id=execution.id,
        metrics={"diag_failed_tests": {"value": 5}},
    )
    assert ids(client.get(FEED)) == [str(execution.id)]
    EvaluationResult.objects.update(execution_updated_at=execution.updated_at)
    scene.requirement.thresholds.update(threshold=2)
    assert ids(client.get(FEED)) == [str(execution.id)]


def test_a_threshold_change_lists_evaluated_executions_again_and_changing_it_back_unlists_them(bearer, scene, fleet):
    key = fleet.source_key(scene.requirement, scene.site)
    execution = fleet.execution(scene.requirement, device=scene.devices[0])
    client = bearer(SCOPE)
    client.post("/api/v1/burn-in/evaluations/results/", {"results": [result_item(execution, key)]}, format="json")
    assert ids(client.get(FEED)) == []
    scene.requirement.thresholds.update(threshold=2)
    assert ids(client.get(FEED)) == [str(execution.id)]
    scene.requirement.thresholds.update(threshold=0)
    assert ids(client.get(FEED)) == []
    assert not PendingEvaluation.objects.exists()


def test_the_work_list_holds_what_is_pending_not_the_history(bearer, scene, fleet):
    """The feed pages through the work list: evaluated executions leave it (kept by triggers, so
    every writer keeps it), finished ones join it, running ones are not on it."""
    key = fleet.source_key(scene.requirement, scene.site)
    client = bearer(SCOPE)
    client.get(FEED)  # the site's first read records the current keys
    history = [fleet.execution(scene.requirement, device=scene.devices[i % 6]) for i in range(12)]
    running = fleet.execution(scene.requirement, device=scene.devices[0], status="running")
    assert PendingEvaluation.objects.count() == 12
    client.post(
        "/api/v1/burn-in/evaluations/results/", {"results": [result_item(e, key) for e in history]}, format="json"
    )
    assert not PendingEvaluation.objects.exists()
    finished = fleet.execution(
        scene.requirement, device=scene.devices[0], execution_id=running.id, metrics={"diag_failed_tests": {"value": 0}}
    )
    assert list(PendingEvaluation.objects.values_list("execution_id", flat=True)) == [running.id]
    assert ids(client.get(FEED)) == [str(finished.id)]


def test_multi_node_executions_of_the_satellites_topologies_are_in_its_feed(bearer, scene, fleet):
    rack = fleet.topology(scene.satellite, "rack", "rack-a01")
    fleet.device(scene.satellite, topologies=[rack])
    requirement = fleet.requirement(
        scene.policy,
        "rack-nccl",
        scope="multi_node",
        unit="rack",
        thresholds=[{"metric": "busbw_gbps", "comparator": "gte", "threshold": 340}],
    )
    execution = fleet.execution(requirement, topology=rack, metrics={"busbw_gbps": {"value": 360}})
    body = bearer(SCOPE).get(FEED).json()["results"]
    assert [r["execution_id"] for r in body] == [str(execution.id)]
    assert body[0]["topology_id"] == str(rack.id) and body[0]["device_id"] is None


def test_pages_walk_the_feed_without_repeats_in_constant_queries(bearer, scene, fleet):
    made = [fleet.execution(scene.requirement, device=scene.devices[i % 6]) for i in range(23)]
    client = bearer(SCOPE, satellite=scene.satellite)
    client.get(FEED + "&limit=1")
    seen, url, query_counts = [], FEED + "&limit=5", []
    while url:
        with CaptureQueriesContext(connection) as queries:
            body = client.get(url).json()
        query_counts.append(len(queries))
        assert "results" in body, body
        seen += [r["execution_id"] for r in body["results"]]
        url = FEED + f"&limit=5&cursor={body['next_cursor']}" if body["next_cursor"] else None
    assert sorted(seen) == sorted(str(e.id) for e in made) and len(seen) == len(set(seen))
    with CaptureQueriesContext(connection) as big:
        assert len(ids(client.get(FEED + "&limit=500"))) == 23
    assert set(query_counts) == {len(big)}


def test_a_tampered_or_foreign_cursor_is_a_400_on_cursor(bearer, scene, fleet):
    for device in scene.devices[:3]:
        fleet.execution(scene.requirement, device=device)
    client = bearer(SCOPE)
    cursor = client.get(FEED + "&limit=1").json()["next_cursor"]
    tampered = client.get(FEED + f"&limit=1&cursor={cursor[:-2]}xx")
    assert tampered.status_code == 400 and tampered.json()["field_errors"][0]["field"] == "cursor"
    foreign = client.get(f"/api/v1/burn-in/evaluations/pending/?site_slug=lon-1&satellite_name=sat-b&cursor={cursor}")
    assert foreign.status_code == 400 and foreign.json()["field_errors"][0]["field"] == "cursor"


def test_a_satellite_token_of_another_site_cannot_read_this_feed(bearer, scene, fleet):
    fleet.execution(scene.requirement, device=scene.devices[0])
    stranger = fleet.satellite(fleet.site("par-1"), "sat-p")
    response = bearer(SCOPE, satellite=stranger).get(FEED)
    assert response.status_code == 403 and response.json()["code"] == "permission_denied"
    own_feed = bearer(SCOPE, satellite=stranger, name="p2").get(
        "/api/v1/burn-in/evaluations/pending/?site_slug=par-1&satellite_name=sat-p"
    )
    assert ids(own_feed) == []


@pytest.mark.parametrize(
    ("query", "field"),
    [
        ("?site_slug=nowhere&satellite_name=sat-a", "site_slug"),
        ("?site_slug=lon-1&satellite_name=sat-z", "satellite_name"),
        ("?site_slug=lon-1&satellite_name=sat-a&limit=0", "limit"),
        ("?site_slug=lon-1&satellite_name=sat-a&limit=501", "limit"),
        ("?satellite_name=sat-a", "site_slug"),
    ],
)
def test_bad_scope_is_a_field_error(bearer, scene, query, field):
    response = bearer(SCOPE).get("/api/v1/burn-in/evaluations/pending/" + query)
    assert response.status_code == 400
    assert response.json()["field_errors"][0]["field"] == field
