"""Reading the projection: filtered list, per-site summary, and `fleet reconcile`."""

from __future__ import annotations

import io

import pytest
from django.core.management import CommandError, call_command

from fleet.burnin.models import PolicyProgress
from tests.burnin.sweeps import sweep_service
from tests.burnin.test_reconcile import evaluate


@pytest.fixture
def reconciled(fleet):
    site = fleet.site("lon-1")
    satellite = fleet.satellite(site, "sat-a")
    devices = [fleet.device(satellite, hostname=f"n{i}") for i in range(4)]
    policy = fleet.policy("gpu.h200.8x")
    diag = fleet.requirement(policy, "gpu-diag")
    evaluate(fleet.execution(diag, device=devices[0]), diag, site, passed=True)
    evaluate(fleet.execution(diag, device=devices[1]), diag, site, passed=False)
    fleet.execution(diag, device=devices[2], status="running")
    sweep_service("lon-1", "sat-a", "gpu.h200.8x")
    return site, devices


def test_the_list_filters_by_verdict_and_device(bearer, reconciled):
    site, devices = reconciled
    client = bearer(["fleet:read"])
    failed = client.get("/api/v1/burn-in/policy-progress/?verdict=failed").json()["results"]
    assert [(r["device_hostname"], r["verdict"]) for r in failed] == [("n1", "failed")]
    by_device = client.get(f"/api/v1/burn-in/policy-progress/?device={devices[3].id}").json()["results"]
    assert [r["verdict"] for r in by_device] == ["not_run"]
    several = client.get("/api/v1/burn-in/policy-progress/?verdict=passed&verdict=in_progress").json()["results"]
    assert sorted(r["verdict"] for r in several) == ["in_progress", "passed"]
    assert len(client.get("/api/v1/burn-in/policy-progress/?site_slug=lon-1&limit=2").json()["results"]) == 2


def test_the_summary_counts_verdicts_per_resource_class_and_requirement(bearer, reconciled):
    site, _ = reconciled
    body = bearer(["fleet:read"]).get(f"/api/v1/burn-in/sites/{site.id}/progress-summary/").json()
    assert body["rows"] == [
        {
            "resource_class": "gpu.h200.8x",
            "requirement": "gpu-diag",
            "gate": "burn-in",
            "passed": 1,
            "failed": 1,
            "errored": 0,
            "not_run": 1,
            "in_progress": 1,
            "total": 4,
        }
    ]


def test_the_summary_of_an_unknown_site_is_404(bearer, db):
    response = bearer(["fleet:read"]).get(
        "/api/v1/burn-in/sites/00000000-0000-0000-0000-000000000000/progress-summary/"
    )
    assert response.status_code == 404 and response.json()["code"] == "not_found"


def test_fleet_reconcile_runs_whole_sweeps_and_prints_totals(reconciled):
    PolicyProgress.objects.all().delete()
    out = io.StringIO()
    call_command("reconcile", "--site", "lon-1", "--satellite", "sat-a", "--limit", "1", stdout=out)
    text = out.getvalue()
    assert "gpu.h200.8x" in text and "ok" in text
    assert PolicyProgress.objects.count() == 4


def test_fleet_reconcile_reports_a_bad_scope_clearly(reconciled):
    with pytest.raises(CommandError, match="resource_class: No acceptance policy"):
        call_command(
            "reconcile", "--site", "lon-1", "--satellite", "sat-a", "--resource-class", "gpu.x", stdout=io.StringIO()
        )


def test_fleet_reconcile_sweeps_a_scope_whose_last_device_left(reconciled, fleet):
    """The default classes are the satellite's reconcile scopes (as `satellites/resource-classes/`
    says), not only the classes of the devices it still manages: a class whose devices all moved
    elsewhere is swept, and its rows cleaned up."""
    site, devices = reconciled
    elsewhere = fleet.satellite(site, "sat-b")
    for device in devices:
        device.satellite = elsewhere
        device.save(update_fields=["satellite"])
    assert PolicyProgress.objects.filter(satellite__name="sat-a").count() == 4
    out = io.StringIO()
    call_command("reconcile", "--site", "lon-1", "--satellite", "sat-a", stdout=out)
    assert "gpu.h200.8x" in out.getvalue()
    assert PolicyProgress.objects.filter(satellite__name="sat-a").count() == 0
