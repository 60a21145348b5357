"""Read API: filters, bounded pages with constant queries, site confinement of satellite clients."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from fleet.policies.models import AcceptancePolicy, ThresholdRule
from fleet_rules.vocabulary import GpuVendor


@pytest.fixture
def big_fleet(fleet):
    site = fleet.site("lon-1")
    sat_a, sat_b = fleet.satellite(site, "sat-a"), fleet.satellite(site, "sat-b")
    racks = [fleet.topology(sat_a, "rack", f"rack-{i:02d}") for i in range(10)]
    devices = [fleet.device(sat_a if i % 2 else sat_b, "gpu.h200.8x", topologies=[racks[i % 10]]) for i in range(520)]
    return site, sat_a, sat_b, racks, devices


def count_queries(client, url) -> tuple[int, dict]:
    with CaptureQueriesContext(connection) as queries:
        response = client.get(url)
    assert response.status_code == 200, response.content
    return len(queries), response.json()


def test_device_list_query_count_is_the_same_at_page_size_10_and_500(bearer, big_fleet):
    client = bearer(["fleet:read"])
    client.get("/api/v1/devices/?limit=1")  # warm the token and content types
    small, small_body = count_queries(client, "/api/v1/devices/?limit=10")
    large, large_body = count_queries(client, "/api/v1/devices/?limit=500")
    assert len(small_body["results"]) == 10 and len(large_body["results"]) == 500
    assert small == large
    assert all(len(d["topologies"]) == 1 for d in large_body["results"])


def test_pages_are_bounded_and_walk_the_whole_list(bearer, big_fleet):
    client = bearer(["fleet:read"])
    seen, url = [], "/api/v1/devices/?limit=5000"
    pages = 0
    while url:
        body = client.get(url).json()
        assert len(body["results"]) <= 500
        seen += [d["id"] for d in body["results"]]
        url = body["next"]
        pages += 1
    assert len(seen) == len(set(seen)) == 520
    assert pages == 2


def test_device_filters(bearer, big_fleet, fleet):
    site, sat_a, sat_b, racks, devices = big_fleet
    client = bearer(["fleet:read"])
    by_satellite = client.get(f"/api/v1/devices/?satellite={sat_a.id}&limit=500").json()["results"]
    assert len(by_satellite) == 260 and {d["satellite_name"] for d in by_satellite} == {"sat-a"}
    by_topology = client.get(f"/api/v1/devices/?topology={racks[3].id}").json()["results"]
    assert len(by_topology) == 52
    fleet.device(sat_a, "gpu.gb200.nvl72", state="maintenance")
    gb = client.get("/api/v1/devices/?resource_class=gpu.gb200.nvl72&state=maintenance").json()["results"]
    assert len(gb) == 1
    assert client.get("/api/v1/devices/?site_slug=elsewhere").json()["results"] == []
    bad = client.get("/api/v1/devices/?state=melted")
    assert bad.status_code == 400 and bad.json()["field_errors"][0]["field"] == "state"


def test_satellite_clients_see_only_their_own_site(bearer, fleet):
    here, there = fleet.site("here"), fleet.site("there")
    sat_here = fleet.satellite(here, "sat")
    fleet.device(sat_here)
    fleet.device(fleet.satellite(there, "sat"))
    client = bearer(["fleet:read"], satellite=sat_here)
    devices = client.get("/api/v1/devices/").json()["results"]
    assert [d["site_slug"] for d in devices] == ["here"]
    assert [s["slug"] for s in client.get("/api/v1/sites/").json()["results"]] == ["here"]


def test_policies_are_listed_with_requirements_and_thresholds_in_constant_queries(bearer, fleet):
    client = bearer(["fleet:read"])
    for i in range(3):
        policy = fleet.policy(f"gpu.class{i}")
        for j in range(4):
            fleet.requirement(policy, f"req-{j}")
    client.get("/api/v1/policies/?limit=1")
    few, _ = count_queries(client, "/api/v1/policies/?limit=1")
    many, body = count_queries(client, "/api/v1/policies/?limit=3")
    assert few == many
    assert [len(p["requirements"]) for p in body["results"]] == [4, 4, 4]
    assert body["results"][0]["requirements"][0]["thresholds"][0]["metric"] == "diag_failed_tests"


def test_resolved_thresholds_show_override_canonical_form_and_key(bearer, fleet):
    site = fleet.site("lon-1")
    policy = fleet.policy()
    requirement = fleet.requirement(
        policy, thresholds=[{"metric": "bw_gbps", "statistic": "min", "comparator": "gte", "threshold": 360}]
    )
    ThresholdRule.objects.create(
        requirement=requirement, metric="bw_gbps", statistic="min", comparator="gte", threshold=350, site=site
    )
    client = bearer(["fleet:read"])
    body = client.get(f"/api/v1/policies/resolved-thresholds/?requirement={requirement.id}&site={site.id}").json()
    assert body["rules"] == [{"metric": "bw_gbps", "statistic": "min", "comparator": "gte", "threshold": 350}]
    assert body["canonical_json"] == '[{"comparator":"gte","metric":"bw_gbps","statistic":"min","threshold":350}]'
    import hashlib

    assert body["evaluation_source_key"] == hashlib.sha256(body["canonical_json"].encode()).hexdigest()
    missing = client.get(f"/api/v1/policies/resolved-thresholds/?requirement={requirement.id}")
    assert missing.status_code == 400 and missing.json()["field_errors"][0]["field"] == "site"


def test_a_satellites_reconcile_scopes_include_its_topologies_and_leftover_rows(bearer, fleet):
    from fleet.burnin.models import PolicyProgress
    from fleet.policies.models import Requirement

    site = fleet.site("lon-1")
    racks_only, devices_only = fleet.satellite(site, "sat-r"), fleet.satellite(site, "sat-d")
    rack = fleet.topology(racks_only, "rack", "r1")
    fleet.device(devices_only, "gpu.h200.8x", topologies=[rack])
    gone = fleet.device(devices_only, "gpu.gb200.nvl72")
    requirement = fleet.requirement(fleet.policy("gpu.b300.8x"))
    from django.utils import timezone

    PolicyProgress.objects.create(
        site=site,
        satellite=racks_only,
        resource_class="gpu.b300.8x",
        requirement=requirement,
        gate="burn-in",
        device=gone,
        target_id=gone.id,
        verdict="not_run",
        policy_version=1,
        reconciled_at=timezone.now(),
        created_at=timezone.now(),
    )
    client = bearer(["fleet:read"])

    def classes(name):
        url = f"/api/v1/satellites/resource-classes/?site_slug=lon-1&satellite_name={name}"
        return client.get(url).json()["resource_classes"]

    assert classes("sat-r") == ["gpu.b300.8x", "gpu.h200.8x"]
    assert classes("sat-d") == ["gpu.gb200.nvl72", "gpu.h200.8x"]
    assert Requirement.objects.count() == 1
    # each class's GPU vendor as its policy declares it: the agent reads the devices' hardware by it
    AcceptancePolicy.objects.filter(resource_class="gpu.b300.8x").update(gpu_vendor=GpuVendor.AMD)
    url = "/api/v1/satellites/resource-classes/?site_slug=lon-1&satellite_name=sat-r"
    assert client.get(url).json()["gpu_vendors"] == {"gpu.b300.8x": "amd"}  # gpu.h200.8x has no policy here
