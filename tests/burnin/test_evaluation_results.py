"""POST /api/v1/burn-in/evaluations/results/: invalid → stale → unchanged → written, per item."""

from __future__ import annotations

import json
import threading
import uuid

import pytest
from django.db import connection, connections
from django.test.utils import CaptureQueriesContext

from fleet.burnin.evaluation_results import service as upsert_service
from fleet.burnin.models import EvaluationResult, TestExecution
from fleet.policies.models import ThresholdRule
from fleet_rules.evaluations import ResultItem
from tests.builders import failing_payload, passing_payload, result_item
from tests.support.locks import wait_for_lock_wait

URL = "/api/v1/burn-in/evaluations/results/"
SCOPE = ["test-execution:evaluate"]


def post(client, items, **kwargs):
    return client.post(URL, {"results": items}, format="json", **kwargs)


def counts(response) -> dict:
    assert response.status_code == 200, response.content
    return response.json()


def test_written(bearer, scene, fleet):
    execution = fleet.execution(scene.requirement, device=scene.devices[0])
    key = fleet.source_key(scene.requirement, scene.site)
    body = counts(post(bearer(SCOPE), [result_item(execution, key)]))
    assert body == {"written": 1, "unchanged": 0, "stale": 0, "invalid": 0}
    stored = EvaluationResult.objects.get()
    assert (stored.passed, stored.evaluation_source_key, stored.execution_updated_at) == (
        True,
        key,
        execution.updated_at,
    )


def test_unchanged_on_replay(bearer, scene, fleet):
    execution = fleet.execution(scene.requirement, device=scene.devices[0])
    key = fleet.source_key(scene.requirement, scene.site)
    client = bearer(SCOPE)
    post(client, [result_item(execution, key)])
    materialised = EvaluationResult.objects.get().materialised_at
    assert counts(post(client, [result_item(execution, key)])) == {
        "written": 0,
        "unchanged": 1,
        "stale": 0,
        "invalid": 0,
    }
    assert EvaluationResult.objects.get().materialised_at == materialised


def test_a_different_payload_for_the_same_version_is_written(bearer, scene, fleet):
    execution = fleet.execution(scene.requirement, device=scene.devices[0])
    key = fleet.source_key(scene.requirement, scene.site)
    client = bearer(SCOPE)
    post(client, [result_item(execution, key)])
    assert counts(post(client, [result_item(execution, key, failing_payload())]))["written"] == 1
    assert EvaluationResult.objects.get().passed is False


def test_stale_when_the_execution_changed_since_it_was_read(bearer, scene, fleet):
    execution = fleet.execution(scene.requirement, device=scene.devices[0])
    key = fleet.source_key(scene.requirement, scene.site)
    read_at = execution.updated_at
    updated = fleet.execution(
        scene.requirement,
        device=scene.devices[0],
        execution_id=execution.id,
        metrics={"diag_failed_tests": {"value": 1}},
    )
    assert updated.updated_at > read_at
    body = counts(post(bearer(SCOPE), [result_item(execution, key, expected_updated_at=read_at)]))
    assert body == {"written": 0, "unchanged": 0, "stale": 1, "invalid": 0}
    assert EvaluationResult.objects.count() == 0


def test_stale_when_the_source_key_is_not_the_current_resolution(bearer, scene, fleet):
    execution = fleet.execution(scene.requirement, device=scene.devices[0])
    body = counts(post(bearer(SCOPE), [result_item(execution, "0" * 64)]))
    assert body["stale"] == 1 and EvaluationResult.objects.count() == 0


@pytest.mark.parametrize("case", ["unknown", "running", "contradiction", "nested_contradiction"])
def test_invalid_items(bearer, scene, fleet, case):
    key = fleet.source_key(scene.requirement, scene.site)
    if case == "unknown":
        execution = TestExecution(
            id=uuid.uuid4(), updated_at=fleet.execution(scene.requirement, device=scene.devices[0]).updated_at
        )
        item = result_item(execution, key)
    elif case == "running":
        execution = fleet.execution(scene.requirement, device=scene.devices[0], status="running")
        item = result_item(execution, key)
    else:
        execution = fleet.execution(scene.requirement, device=scene.devices[0])
        payload = failing_payload() | {"passed": True}
        if case == "nested_contradiction":
            payload["metric_evaluations"]["diag_failed_tests"]["passed"] = True
        item = result_item(execution, key, payload)
    body = counts(post(bearer(SCOPE), [item]))
    assert body == {"written": 0, "unchanged": 0, "stale": 0, "invalid": 1}
    assert EvaluationResult.objects.count() == 0


def test_invalid_wins_over_stale(bearer, scene, fleet):
    execution = fleet.execution(scene.requirement, device=scene.devices[0], status="running")
    assert counts(post(bearer(SCOPE), [result_item(execution, "0" * 64)]))["invalid"] == 1


def test_all_four_outcomes_in_one_request_with_exact_counts(bearer, scene, fleet):
    key = fleet.source_key(scene.requirement, scene.site)
    client = bearer(SCOPE)
    done = [fleet.execution(scene.requirement, device=d) for d in scene.devices[:4]]
    post(client, [result_item(done[0], key), result_item(done[1], key)])  # stored already
    running = fleet.execution(scene.requirement, device=scene.devices[4], status="running")
    items = [
        result_item(done[0], key),  # unchanged
        result_item(done[1], key),  # unchanged
        result_item(done[2], key),  # written
        result_item(done[3], "f" * 64),  # stale (key)
        result_item(running, key),  # invalid (running)
        result_item(TestExecution(id=uuid.uuid4(), updated_at=done[0].updated_at), key),  # invalid (unknown)
    ]
    assert counts(post(client, items)) == {"written": 1, "unchanged": 2, "stale": 1, "invalid": 2}
    assert counts(post(client, items)) == {"written": 0, "unchanged": 3, "stale": 1, "invalid": 2}


def test_threshold_edited_between_feed_and_post_is_stale_until_reread(bearer, scene, fleet):
    execution = fleet.execution(scene.requirement, device=scene.devices[0])
    client = bearer(SCOPE)
    feed = "/api/v1/burn-in/evaluations/pending/?site_slug=lon-1&satellite_name=sat-a"
    first = client.get(feed).json()["results"][0]
    ThresholdRule.objects.filter(requirement=scene.requirement).update(threshold=1)
    item = {
        "execution_id": first["execution_id"],
        "evaluation_result": passing_payload(threshold=0),
        "evaluation_source_key": first["evaluation_source_key"],
        "expected_updated_at": first["updated_at"],
    }
    assert counts(post(client, [item]))["stale"] == 1
    again = client.get(feed).json()["results"][0]
    assert again["evaluation_source_key"] != first["evaluation_source_key"]
    assert again["thresholds"][0]["threshold"] == 1
    item |= {"evaluation_result": passing_payload(threshold=1), "evaluation_source_key": again["evaluation_source_key"]}
    assert counts(post(client, [item]))["written"] == 1
    assert client.get(feed).json()["results"] == []
    assert execution.id == uuid.UUID(first["execution_id"])


def test_execution_updated_between_feed_and_post_is_stale_until_reread(bearer, scene, fleet):
    execution = fleet.execution(scene.requirement, device=scene.devices[0])
    client = bearer(SCOPE)
    feed = "/api/v1/burn-in/evaluations/pending/?site_slug=lon-1&satellite_name=sat-a"
    first = client.get(feed).json()["results"][0]
    fleet.execution(
        scene.requirement,
        device=scene.devices[0],
        execution_id=execution.id,
        metrics={"diag_failed_tests": {"value": 0, "unit": "tests"}},
    )
    item = {
        "execution_id": first["execution_id"],
        "evaluation_result": passing_payload(),
        "evaluation_source_key": first["evaluation_source_key"],
        "expected_updated_at": first["updated_at"],
    }
    assert counts(post(client, [item]))["stale"] == 1
    again = client.get(feed).json()["results"][0]
    assert again["updated_at"] != first["updated_at"]
    item["expected_updated_at"] = again["updated_at"]
    assert counts(post(client, [item]))["written"] == 1


def test_a_satellite_token_of_another_site_counts_as_invalid(bearer, scene, fleet):
    execution = fleet.execution(scene.requirement, device=scene.devices[0])
    key = fleet.source_key(scene.requirement, scene.site)
    stranger = fleet.satellite(fleet.site("par-1"), "sat-p")
    body = counts(post(bearer(SCOPE, satellite=stranger), [result_item(execution, key)]))
    assert body == {"written": 0, "unchanged": 0, "stale": 0, "invalid": 1}
    own = bearer(SCOPE, satellite=scene.satellite, name="own")
    assert counts(post(own, [result_item(execution, key)]))["written"] == 1


def test_duplicate_execution_ids_are_one_400_naming_both_paths(bearer, scene, fleet):
    key = fleet.source_key(scene.requirement, scene.site)
    a, b = (fleet.execution(scene.requirement, device=d) for d in scene.devices[:2])
    response = post(bearer(SCOPE), [result_item(a, key), result_item(b, key), result_item(a, key)])
    assert response.status_code == 400
    fields = {e["field"]: e["messages"] for e in response.json()["field_errors"]}
    assert set(fields) == {"results.0.execution_id", "results.2.execution_id"}
    assert "results.2" in fields["results.0.execution_id"][0]
    assert EvaluationResult.objects.count() == 0


def test_request_shape_errors_are_all_listed_and_nothing_is_written(bearer, scene, fleet):
    key = fleet.source_key(scene.requirement, scene.site)
    good = fleet.execution(scene.requirement, device=scene.devices[0])
    bad_comparator = passing_payload()
    bad_comparator["metric_evaluations"]["diag_failed_tests"]["value_evaluation"]["comparator"] = "approx"
    items = [
        result_item(good, key),
        {
            "evaluation_result": passing_payload(),
            "evaluation_source_key": key,
            "expected_updated_at": good.updated_at.isoformat(),
        },
        result_item(good, key.upper()) | {"execution_id": str(uuid.uuid4())},
        result_item(good, key) | {"execution_id": "not-a-uuid", "expected_updated_at": "soon"},
        result_item(good, key, bad_comparator) | {"execution_id": str(uuid.uuid4())},
        result_item(good, key, {"reason": None}) | {"execution_id": str(uuid.uuid4())},
        "not an object",
    ]
    response = post(bearer(SCOPE), items)
    assert response.status_code == 400
    fields = {e["field"] for e in response.json()["field_errors"]}
    assert fields == {
        "results.1.execution_id",
        "results.2.evaluation_source_key",
        "results.3.execution_id",
        "results.3.expected_updated_at",
        "results.4.evaluation_result.metric_evaluations.diag_failed_tests.value_evaluation.comparator",
        "results.5.evaluation_result.passed",
        "results.6",
    }
    assert EvaluationResult.objects.count() == 0


def test_wrong_json_types_are_refused_not_coerced(bearer, scene, fleet):
    execution = fleet.execution(scene.requirement, device=scene.devices[0])
    key = fleet.source_key(scene.requirement, scene.site)
    payload = passing_payload() | {"passed": "true"}
    response = post(bearer(SCOPE), [result_item(execution, key, payload)])
    assert response.status_code == 400
    assert response.json()["field_errors"][0]["field"] == "results.0.evaluation_result.passed"


def test_more_items_than_the_maximum_is_a_400(bearer, scene, fleet, settings):
    settings.FLEET = settings.FLEET | {"EVALUATION_RESULTS_MAX_ITEMS": 2}
    execution = fleet.execution(scene.requirement, device=scene.devices[0])
    key = fleet.source_key(scene.requirement, scene.site)
    items = [result_item(execution, key) | {"execution_id": str(uuid.uuid4())} for _ in range(3)]
    response = post(bearer(SCOPE), items)
    assert response.status_code == 400
    assert response.json()["field_errors"] == [
        {"field": "results", "messages": ["At most 2 results per request; got 3."]}
    ]


def test_missing_results_is_a_field_error(bearer, scene):
    response = bearer(SCOPE).post(URL, {}, format="json")
    assert response.status_code == 400 and response.json()["field_errors"][0]["field"] == "results"


@pytest.mark.parametrize("fmt", ["multipart", None])
def test_form_and_multipart_bodies_carry_results_as_one_json_value(bearer, scene, fleet, fmt):
    execution = fleet.execution(scene.requirement, device=scene.devices[0])
    key = fleet.source_key(scene.requirement, scene.site)
    client = bearer(SCOPE)
    encoded = json.dumps([result_item(execution, key)])
    if fmt == "multipart":
        response = client.post(URL, {"results": encoded}, format="multipart")
    else:
        from urllib.parse import urlencode

        response = client.post(URL, urlencode({"results": encoded}), content_type="application/x-www-form-urlencoded")
    assert counts(response)["written"] == 1
    garbled = client.post(URL, {"results": "[{not json"}, format="multipart")
    assert garbled.status_code == 400
    assert garbled.json()["field_errors"][0]["field"] == "results"
    nested = client.post(URL, {"results[0]execution_id": str(execution.id)}, format="multipart")
    assert nested.status_code == 400 and nested.json()["field_errors"][0]["field"] == "results"


def _many_executions(scene, n: int) -> list[TestExecution]:
    from django.utils import timezone

    now = timezone.now()
    rows = [
        TestExecution(
            id=uuid.uuid4(),
            site=scene.site,
            requirement=scene.requirement,
            test="dcgm-diag",
            device=scene.devices[i % len(scene.devices)],
            status="completed",
            metrics={"diag_failed_tests": {"value": 0}},
            created_at=now,
            updated_at=now,
        )
        for i in range(n)
    ]
    return TestExecution.objects.bulk_create(rows)


def test_query_count_is_the_same_for_1_and_500_items(bearer, scene, fleet):
    key = fleet.source_key(scene.requirement, scene.site)
    client = bearer(SCOPE, satellite=scene.satellite)
    executions = _many_executions(scene, 501)
    post(client, [result_item(executions[0], "e" * 64)])  # warm the token
    with CaptureQueriesContext(connection) as one:
        assert counts(post(client, [result_item(executions[0], key)]))["written"] == 1
    with CaptureQueriesContext(connection) as many:
        assert counts(post(client, [result_item(e, key) for e in executions[1:]]))["written"] == 500
    assert len(one) == len(many), [q["sql"][:80] for q in many]


@pytest.mark.django_db(transaction=True)
def test_concurrent_posts_never_move_a_result_backwards(scene, fleet, monkeypatch):
    """A (computed for t1) loads, then the execution moves to t2 and B (for t2) posts. Whichever
    commits last, the result for t2 survives."""
    key = fleet.source_key(scene.requirement, scene.site)
    original_write = upsert_service.write_results

    for order in ("older_commits_last", "older_blocked_by_newer"):
        EvaluationResult.objects.all().delete()
        execution = fleet.execution(scene.requirement, device=scene.devices[0])
        t1 = execution.updated_at
        plan = {
            name: {
                "loaded": threading.Event(),
                "go": threading.Event(),
                "wrote": threading.Event(),
                "commit": threading.Event(),
            }
            for name in ("A", "B")
        }
        outcome = {}

        def hooked_write(items, _plan=plan):
            me = _plan[threading.current_thread().name]
            me["loaded"].set()
            assert me["go"].wait(10)
            written = original_write(items)
            me["wrote"].set()
            assert me["commit"].wait(10)
            return written

        monkeypatch.setattr(upsert_service, "write_results", hooked_write)

        def run(name, item, _outcome=outcome):
            try:
                _outcome[name] = upsert_service.evaluation_results_upsert(items=[item], actor=None)
            finally:
                connections.close_all()

        def item_for(at, passed, _execution=execution):
            return ResultItem(_execution.id, passing_payload() if passed else failing_payload(), key, at)

        a = threading.Thread(target=run, name="A", args=("A", item_for(t1, True)))
        a.start()
        assert plan["A"]["loaded"].wait(10)
        t2 = fleet.execution(
            scene.requirement,
            device=scene.devices[0],
            execution_id=execution.id,
            metrics={"diag_failed_tests": {"value": 3}},
        ).updated_at
        b = threading.Thread(target=run, name="B", args=("B", item_for(t2, False)))
        b.start()
        assert plan["B"]["loaded"].wait(10)
        if order == "older_commits_last":
            plan["B"]["go"].set()
            plan["B"]["commit"].set()
            b.join(10)
            plan["A"]["go"].set()
            plan["A"]["commit"].set()
            a.join(10)
        else:
            plan["B"]["go"].set()
            assert plan["B"]["wrote"].wait(10)  # B holds the row, uncommitted
            plan["A"]["go"].set()
            plan["A"]["commit"].set()
            wait_for_lock_wait("A, behind B's uncommitted upsert,")
            plan["B"]["commit"].set()
            b.join(10)
            a.join(10)
        assert not a.is_alive() and not b.is_alive()
        stored = EvaluationResult.objects.get(execution=execution)
        assert stored.execution_updated_at == t2, order
        assert stored.passed is False, order
        assert (outcome["A"].written, outcome["A"].stale) == (0, 1), order
        assert outcome["B"].written == 1, order


def test_one_execution_spelled_two_ways_is_a_duplicate_not_a_500(bearer, scene, fleet):
    key = fleet.source_key(scene.requirement, scene.site)
    execution = fleet.execution(scene.requirement, device=scene.devices[0])
    twice = [result_item(execution, key), result_item(execution, key) | {"execution_id": execution.id.hex}]
    response = post(bearer(SCOPE), twice)
    assert response.status_code == 400
    assert {e["field"] for e in response.json()["field_errors"]} == {"results.0.execution_id", "results.1.execution_id"}
    assert EvaluationResult.objects.count() == 0
