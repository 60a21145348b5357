"""The bulk endpoints run with CPython's cyclic collector paused (fleet.core.heap): the body's
parse (inside authentication) and the service call, and it runs again once the request is done."""

from __future__ import annotations

import gc

import pytest

from fleet.burnin.api import views
from fleet.core.parsers import StorableJSONParser
from fleet_rules.evaluations import ResultItem
from tests.builders import passing_payload, result_item

pytestmark = pytest.mark.django_db


def test_an_upsert_parses_and_writes_with_the_collector_paused(bearer, scene, fleet, collector_seen):
    parsed = collector_seen(StorableJSONParser, "parse")
    upserted = collector_seen(views, "evaluation_results_upsert")
    execution = fleet.execution(scene.requirement, device=scene.devices[0])
    item = result_item(execution, fleet.source_key(scene.requirement, scene.site))
    response = bearer(["test-execution:evaluate"]).post(
        "/api/v1/burn-in/evaluations/results/", {"results": [item]}, format="json"
    )
    assert response.status_code == 200, response.content
    assert (parsed, upserted) == ([False], [False])
    assert gc.isenabled()


def test_a_reconcile_page_runs_with_the_collector_paused(bearer, scene, collector_seen):
    paged = collector_seen(views, "progress_reconcile_page")
    body = {"site_slug": "lon-1", "satellite_name": "sat-a", "resource_class": "gpu.h200.8x"}
    response = bearer(["burn-in-policy-progress:write"]).post(
        "/api/v1/burn-in/policy-progress/reconcile/", body, format="json"
    )
    assert response.status_code == 200, response.content
    assert paged == [False]
    assert gc.isenabled()


def test_a_pending_feed_page_runs_with_the_collector_paused(bearer, scene, collector_seen):
    paged = collector_seen(views, "pending_evaluations_page")
    response = bearer(["test-execution:evaluate"]).get(
        "/api/v1/burn-in/evaluations/pending/?site_slug=lon-1&satellite_name=sat-a"
    )
    assert response.status_code == 200, response.content
    assert paged == [False]
    assert gc.isenabled()


def test_other_endpoints_leave_the_collector_running(bearer, scene, collector_seen):
    summarised = collector_seen(views, "progress_summary")
    response = bearer(["fleet:read"]).get(f"/api/v1/burn-in/sites/{scene.site.id}/progress-summary/")
    assert response.status_code == 200, response.content
    assert summarised == [True]


def test_the_upsert_service_runs_paused_for_callers_other_than_the_view(scene, fleet, collector_seen):
    from fleet.burnin.evaluation_results import service

    loaded = collector_seen(service, "load_facts")
    execution = fleet.execution(scene.requirement, device=scene.devices[0])
    key = fleet.source_key(scene.requirement, scene.site)
    item = ResultItem(execution.id, passing_payload(), key, execution.updated_at)
    assert service.evaluation_results_upsert(items=[item], actor=None).written == 1
    assert loaded == [False]
    assert gc.isenabled()
