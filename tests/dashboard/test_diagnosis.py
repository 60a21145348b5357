"""Diagnosis on the dashboard: a culprit on its device page and the failures page; outliers as
suspects on the failures page and on the device page."""

from __future__ import annotations

from fleet.burnin.diagnosis.isolation import isolation_advance, isolation_dispatch
from fleet_rules.vocabulary import IsolationStatus
from tests.dashboard.conftest import VIEWER
from tests.dashboard.test_pages import text
from tests.diagnosis.test_isolation import Rack
from tests.diagnosis.test_outliers import SIBLINGS, seed


def test_a_culprit_shows_on_its_device_page_and_the_failures_page(person, fleet):
    rack = Rack(fleet)
    plan = isolation_dispatch(site=rack.site, topology_id=rack.rack.id, requirement_name="rack-nccl", requested_by="t")
    while plan.status == IsolationStatus.RUNNING:
        rack.run_round()
        plan = isolation_advance(site=rack.site, plan_id=plan.id, requested_by="t")
    browser = person(VIEWER)
    device = text(browser.get("/sites/lon-1/devices/a01-n05/"))
    assert '<li class="diagnosis"><strong>✗ culprit</strong>: its presence makes rack-nccl fail on rack-a01' in device
    assert 'class="diagnosis"' not in text(browser.get("/sites/lon-1/devices/a01-n04/"))
    failures = text(browser.get("/sites/lon-1/failures/"))
    assert 'id="diagnoses"' in failures and 'data-diagnosis="a01-n05"' in failures


def test_outliers_are_suspects_on_the_failures_page_and_marked_on_the_device_page(person, fleet):
    seed(fleet, SIBLINGS + [320.0])
    browser = person(VIEWER)
    failures = text(browser.get("/sites/lon-1/failures/"))
    assert 'id="suspects"' in failures and failures.count("data-suspect=") == 1
    assert 'data-suspect="a01-n09"' in failures
    assert '<li class="outlier">⚠ nccl-local · busbw_gbps.min' in text(browser.get("/sites/lon-1/devices/a01-n09/"))
    assert 'class="outlier"' not in text(browser.get("/sites/lon-1/devices/a01-n00/"))


def test_the_grid_marks_an_outlier_s_cell(person, fleet):
    seed(fleet, SIBLINGS + [320.0])
    page = text(person(VIEWER).get("/sites/lon-1/grid/?resource_class=gpu.h200.8x"))
    assert page.count('class="outlier-mark"') == 1
    row = page.split('data-hostname="a01-n09"')[1].split("</tr>")[0]
    assert 'class="outlier-mark" title="outlier among its siblings: robust z' in row


def test_the_metric_picture_rings_the_outlier(person, fleet):
    seed(fleet, SIBLINGS + [320.0])
    page = text(person(VIEWER).get("/sites/lon-1/metrics/nccl-local/"))
    assert page.count('class="pt-outlier"') == 1 and 'data-outlier="a01-n09"' in page
    assert "a01-n09: 320 GB/s (outlier: robust z" in page
