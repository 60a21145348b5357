"""GET /metrics: every family the service exports, after real sweeps, upserts and dispatches,
parsed with prometheus-client's own parser; who may scrape; bounded scrape-time queries."""

from __future__ import annotations

import base64
import uuid
from collections import Counter
from datetime import timedelta

import pytest
from django.db import OperationalError, connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone
from oauth2_provider.models import Application
from prometheus_client.parser import text_string_to_metric_families

from fleet.burnin.models import PolicyProgress
from fleet.core.metrics import scrape_gauges, scrape_permissions
from fleet.inventory.models import Device, Satellite
from fleet.inventory.services import operator_credentials_issue
from fleet.jobs.models import Job
from tests.builders import result_item
from tests.burnin.sweeps import sweep_api
from tests.burnin.test_rerun import World
from tests.conftest import CLIENT_SECRET, fetch_token
from tests.payloads import passing_payload
from tests.schema_validation import ValidatingAPIClient

RECONCILE_BODY = {"site_slug": "lon-1", "satellite_name": "sat-a", "resource_class": "gpu.h200.8x"}
UPSERT = "/api/v1/burn-in/evaluations/results/"
DISPATCH_OPERATION = "api_v1_burn_in_sites_rerun_plans_dispatch"

Samples = dict[tuple[str, frozenset], float]


def parse(text: str) -> Samples:
    samples: Samples = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            samples[(sample.name, frozenset(sample.labels.items()))] = sample.value
    return samples


def scrape(client=None, **extra) -> Samples:
    scrape_gauges.forget()
    response = (client or ValidatingAPIClient()).get("/metrics", **extra)
    assert response.status_code == 200, response.content
    assert response["Content-Type"].startswith("text/plain; version=0.0.4")
    return parse(response.content.decode())


def value(samples: Samples, name: str, **labels) -> float:
    return samples.get((name, frozenset(labels.items())), 0.0)


def delta(before: Samples, after: Samples, name: str, **labels) -> float:
    return value(after, name, **labels) - value(before, name, **labels)


@pytest.fixture
def world(fleet):
    return World(fleet)


def test_a_scrape_holds_every_family_after_a_sweep_an_upsert_and_a_dispatch(
    world, fleet, bearer, settings, django_capture_on_commit_callbacks
):
    # given: a satellite heard from 42 s ago, two devices passed, a device of a class without policy
    Satellite.objects.filter(pk=world.satellite.pk).update(last_seen_at=timezone.now() - timedelta(seconds=42))
    stray = fleet.device(world.satellite, "gpu.unknown.1x", hostname="stray")
    before = scrape()

    with django_capture_on_commit_callbacks(execute=True):
        world.pass_single_node(world.devices[:2])  # 4 results written through the service
        execution = world.fleet.execution(world.diag, device=world.devices[2])
        key = world.fleet.source_key(world.diag, world.site)
        upserted = bearer(["test-execution:evaluate"]).post(
            UPSERT,
            {
                "results": [
                    result_item(execution, key, passing_payload()),  # written
                    result_item(execution, key, passing_payload(), expected_updated_at=timezone.now())
                    | {
                        "execution_id": str(world.fleet.execution(world.diag, device=world.devices[3]).id)
                    },  # stale: computed for another version of that execution
                    result_item(execution, key) | {"execution_id": str(uuid.uuid4())},  # invalid: no such execution
                ]
            },
            format="json",
        )
        assert upserted.status_code == 200, upserted.content
        replay = bearer(["test-execution:evaluate"], name="replayer").post(
            UPSERT, {"results": [result_item(execution, key, passing_payload())]}, format="json"
        )
        assert replay.json()["unchanged"] == 1

        reconciler = bearer(["burn-in-policy-progress:write"], name="reconciler")
        first = sweep_api(reconciler, RECONCILE_BODY)
        again = sweep_api(reconciler, RECONCILE_BODY)

        dispatcher = bearer(["job:create"], name="dispatcher")
        site = world.site.id
        dispatched = dispatcher.post(
            f"/api/v1/burn-in/sites/{site}/rerun-plans/dispatch/",
            {"device_ids": [str(d.id) for d in [*world.devices, stray]]},
            format="json",
        ).json()

        settings.FLEET = settings.FLEET | {"RECONCILE_GUARD_ABSOLUTE": 0, "RECONCILE_GUARD_RATIO": 0}
        Device.objects.filter(pk=world.devices[3].pk).update(state="decommissioned")
        tripped = sweep_api(reconciler, RECONCILE_BODY)
    after = scrape()

    # then: the counters say what the responses said
    assert tripped[-1]["guard_tripped"] is True
    pages = [*first, *again, *tripped]
    for outcome in ("written", "unchanged", "deferred", "deleted"):
        expected = sum(page[outcome] for page in pages)
        assert delta(before, after, "fleet_reconcile_targets_total", outcome=outcome) == expected, outcome
    # 9 targets: the stale result leaves one deferred; the second sweep finds the rest unchanged
    assert [sum(p[k] for p in first) for k in ("written", "deferred")] == [8, 1]
    assert [sum(p[k] for p in again) for k in ("unchanged", "deferred")] == [8, 1]
    guard = {"site": "lon-1", "satellite": "sat-a", "resource_class": "gpu.h200.8x"}
    assert delta(before, after, "fleet_reconcile_guard_trips_total", **guard) == 1
    assert value(after, "fleet_reconcile_sweep_targets", **guard) == tripped[-1]["target_count"] == 7

    assert delta(before, after, "fleet_evaluation_results_total", outcome="written") == 5
    assert delta(before, after, "fleet_evaluation_results_total", outcome="unchanged") == 1
    assert delta(before, after, "fleet_evaluation_results_total", outcome="stale") == 1
    assert delta(before, after, "fleet_evaluation_results_total", outcome="invalid") == 1

    jobs = Counter(job["workflow_name"] for job in dispatched["created_jobs"])
    assert jobs["SingleNodeBurnInWorkflow"] == 2
    for workflow in ("SingleNodeBurnInWorkflow", "MultiNodeBurnInCollectiveWorkflow"):
        assert delta(before, after, "fleet_dispatch_jobs_created_total", workflow=workflow) == jobs[workflow]
    skips = Counter()
    for group in dispatched["skips"]:
        skips[group["reason"]] += len(group["device_ids"])
    assert skips["already_satisfied"] == 5  # both requirements of two devices, gpu-diag of a third
    for reason in ("already_satisfied", "topology_cohort_blocked", "projection_pending", "device_contended"):
        assert delta(before, after, "fleet_dispatch_skips_total", reason=reason) == skips[reason], reason
    assert [e["reason"] for e in dispatched["excluded_devices"]] == ["no_acceptance_policy"]
    assert delta(before, after, "fleet_dispatch_excluded_total", reason="no_acceptance_policy") == 1

    # the gauges are the database's state at scrape time
    assert value(after, "fleet_jobs", site="lon-1", status="queued") == Job.objects.filter(status="queued").count() == 2
    for verdict, n in Counter(
        PolicyProgress.objects.filter(requirement=world.diag).values_list("verdict", flat=True)
    ).items():
        labels = {"site": "lon-1", "resource_class": "gpu.h200.8x", "requirement": "gpu-diag", "verdict": verdict}
        assert value(after, "fleet_targets", **labels) == n
    assert (
        value(
            after, "fleet_targets", site="lon-1", resource_class="gpu.h200.8x", requirement="gpu-diag", verdict="passed"
        )
        == 3
    )
    assert 42 <= value(after, "fleet_satellite_last_seen_seconds", site="lon-1", satellite="sat-a") < 120
    assert value(after, "fleet_reconcile_sweep_age_seconds", **guard) < 120

    # and every request was counted under its operationId
    ok = {"operation": DISPATCH_OPERATION, "method": "POST", "status": "200"}
    assert delta(before, after, "fleet_http_requests_total", **ok) == 1
    assert delta(before, after, "fleet_http_request_duration_seconds_count", operation=DISPATCH_OPERATION) == 1
    reconciles = {"operation": "api_v1_burn_in_policy_progress_reconcile_create", "method": "POST", "status": "200"}
    assert delta(before, after, "fleet_http_requests_total", **reconciles) == len(pages)


def test_a_rolled_back_dispatch_counts_nothing(world, bearer, django_capture_on_commit_callbacks, monkeypatch):
    world.pass_single_node()
    world.sweep()
    before = scrape()

    def refuse(**kwargs):
        raise OperationalError("the database went away mid-dispatch")

    monkeypatch.setattr("fleet.burnin.reruns.service.jobs_create", refuse)
    with django_capture_on_commit_callbacks(execute=True):
        response = bearer(["job:create"]).post(
            f"/api/v1/burn-in/sites/{world.site.id}/rerun-plans/dispatch/",
            {"device_ids": [str(d.id) for d in world.devices], "mode": "all"},
            format="json",
        )
    assert response.status_code == 503
    after = scrape()
    assert delta(before, after, "fleet_dispatch_jobs_created_total", workflow="SingleNodeBurnInWorkflow") == 0
    assert delta(before, after, "fleet_database_unavailable_total") == 1
    unavailable = {"operation": DISPATCH_OPERATION, "method": "POST", "status": "503"}
    assert delta(before, after, "fleet_http_requests_total", **unavailable) == 1


def test_scrape_time_gauges_take_the_same_queries_at_two_fleet_sizes_and_are_cached(fleet, settings):
    def queries() -> int:
        scrape_gauges.forget()
        with CaptureQueriesContext(connection) as captured:
            assert ValidatingAPIClient().get("/metrics").status_code == 200
        return len(captured)

    def grow(world: World) -> None:
        Satellite.objects.update(last_seen_at=timezone.now())
        Job.objects.create(site=world.site, satellite=world.satellite, workflow_name="SingleNodeBurnInWorkflow")
        world.sweep()

    small = World(fleet, devices=2)
    grow(small)
    at_small = queries()
    for i in range(4):
        site = fleet.site(f"par-{i}")
        satellite = fleet.satellite(site, "sat-a")
        for n in range(6):
            fleet.device(satellite, hostname=f"p{i}-n{n}")
        Job.objects.create(site=site, satellite=satellite, workflow_name="SingleNodeBurnInWorkflow")
    grow(small)
    assert PolicyProgress.objects.count() > 0 and Job.objects.values("site").distinct().count() == 5
    # jobs, targets, sweeps, in service uncertified, satellites, devices by state, breakers, autopilots,
    # webhook subscriptions, the outbox's backlog: one each
    assert queries() == at_small == 10

    settings.METRICS_CACHE_SECONDS = 60
    queries()
    with CaptureQueriesContext(connection) as cached:
        assert ValidatingAPIClient().get("/metrics").status_code == 200
    assert len(cached) == 0, "a scrape within the cache period reads nothing"


# --- who may scrape ---------------------------------------------------------------------------------


def test_loopback_may_scrape_other_addresses_need_a_metrics_token(db, oauth_client, settings):
    api = ValidatingAPIClient()
    assert api.get("/metrics", REMOTE_ADDR="127.0.0.1").status_code == 200
    refused = api.get("/metrics", REMOTE_ADDR="192.0.2.7")
    assert refused.status_code == 401 and refused.json()["code"] == "not_authenticated"

    app = oauth_client("prometheus")
    reader = ValidatingAPIClient()
    reader.credentials(HTTP_AUTHORIZATION=f"Bearer {fetch_token(reader, app, 'fleet:read')}")
    assert reader.get("/metrics", REMOTE_ADDR="192.0.2.7").status_code == 403

    scraper = ValidatingAPIClient()
    scraper.credentials(HTTP_AUTHORIZATION=f"Bearer {fetch_token(scraper, app, 'fleet:metrics')}")
    assert scraper.get("/metrics", REMOTE_ADDR="192.0.2.7").status_code == 200

    settings.METRICS_ALLOW = ["192.0.2.0/24"]
    from fleet.core import probes

    probes._allowed_networks.cache_clear()
    try:
        assert api.get("/metrics", REMOTE_ADDR="192.0.2.7").status_code == 200
        assert api.get("/metrics", REMOTE_ADDR="127.0.0.1").status_code == 401
    finally:
        probes._allowed_networks.cache_clear()


def token_response(client_id: str, secret: str, scope: str):
    basic = base64.b64encode(f"{client_id}:{secret}".encode()).decode()
    return ValidatingAPIClient().post(
        "/o/token/",
        {"grant_type": "client_credentials", "scope": scope},
        format="multipart",
        HTTP_AUTHORIZATION=f"Basic {basic}",
    )


def test_a_satellite_client_cannot_get_the_metrics_scope(fleet, oauth_client):
    satellite = fleet.satellite(fleet.site("lon-1"), "sat-a")
    app = oauth_client("sat", satellite=satellite)
    response = token_response(app.client_id, CLIENT_SECRET, "fleet:metrics")
    assert response.status_code == 400 and response.json()["error"] == "invalid_scope"


def test_an_operator_client_scrapes_with_at_most_its_owners_permissions(db, user_factory):
    assert set(scrape_permissions()) == {
        "burnin.view_policyprogress",
        "inventory.view_device",
        "inventory.view_satellite",
        "jobs.view_job",
    }
    owner = user_factory("prom-owner", perms=list(scrape_permissions()))
    issued = operator_credentials_issue(name="prometheus", owner=owner, scopes=["fleet:metrics"])
    token = token_response(issued.client_id, issued.client_secret, "fleet:metrics").json()["access_token"]
    client = ValidatingAPIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    assert client.get("/metrics", REMOTE_ADDR="192.0.2.7").status_code == 200
    owner.user_permissions.clear()
    owner = type(owner).objects.get(pk=owner.pk)  # drop the permission cache
    assert Application.objects.get(client_id=issued.client_id).user_id == owner.pk
    assert client.get("/metrics", REMOTE_ADDR="192.0.2.7").status_code == 403
