"""What an operator does with the filters and pickers, in Chromium (issue 27, findings 1, 6, 9):
filters offer what exists and refuse what does not, the grid opens on the class in trouble, the
rack picker follows the filtered class, and a ticked failure row reruns that row's target only."""

from __future__ import annotations

import re

import pytest

from fleet.jobs.models import Job
from tests.dashboard.more_classes import GB200, add_green_gb200_domain, fail_gpu_diag_too
from tests.dashboard.test_browser import Visit, chromium, site_served  # noqa: F401 - fixtures


@pytest.fixture
def tab(chromium, site_served, request):  # noqa: F811 - the imported fixtures
    """A tab on the burnt-in (failing) H200 site beside a green GB200 NVLink domain."""
    world, base = site_served
    add_green_gb200_domain(world)
    context = chromium.new_context(viewport={"width": 1400, "height": 1000})
    page = context.new_page()
    page.set_default_timeout(15_000)
    yield Visit(page, base, request.node.name.removeprefix("test_")[:60]), world
    context.close()


def test_filters_offer_what_exists_and_an_unknown_value_is_a_400_naming_the_known_ones(tab):
    visit, world = tab
    page = visit.page
    visit.sign_in("viewer")
    visit.go("/sites/lon-1/failures/", "failures")
    offered = page.locator('select[name="resource_class"] option').evaluate_all("os => os.map(o => o.value)")
    assert offered == ["", GB200, "gpu.h200.8x"]
    page.select_option('select[name="resource_class"]', "gpu.h200.8x")
    page.select_option('select[name="requirement"]', "hbm-bandwidth")
    page.click("form.filters button[type=submit]")
    page.wait_for_url(re.compile(r"requirement=hbm-bandwidth"))
    visit.shoot("filtered")
    assert page.locator("tr[data-target]").count() == 2
    # Another class: its requirements differ, so the requirement filter goes back to "any" (a
    # stale hbm-bandwidth would be refused as unknown for GB200).
    page.select_option('select[name="resource_class"]', GB200)
    assert page.locator('select[name="requirement"]').input_value() == ""
    page.click("form.filters button[type=submit]")
    page.wait_for_url(re.compile(r"resource_class=gpu.gb200"))
    assert "Nothing failed" in page.inner_text("main")  # true: the GB200 domain passed everything

    response = page.goto(visit.base + "/sites/lon-1/failures/?resource_class=h200")
    visit.shoot("unknown-class")
    assert response.status == 400
    body = page.inner_text("main")
    assert "unknown resource class 'h200'" in body and "gpu.h200.8x" in body
    assert "Nothing failed" not in body


def test_the_grid_opens_on_the_class_with_the_failures(tab):
    visit, world = tab
    page = visit.page
    visit.sign_in("viewer")
    visit.go("/sites/lon-1/grid/", "grid")
    assert page.locator('select[name="resource_class"]').input_value() == "gpu.h200.8x"
    assert page.locator('tr[data-hostname="a00-n00"] td[data-requirement="hbm-bandwidth"]').inner_text().strip() == "✗"


def test_the_rack_picker_follows_the_filtered_class(tab):
    visit, world = tab
    page = visit.page
    visit.sign_in("operator")
    visit.go("/sites/lon-1/grid/?resource_class=gpu.h200.8x", "h200-grid")
    picker = page.locator('select[aria-label="rack to rerun"]')
    assert picker.input_value() == "rack-a00"
    assert picker.locator("option").evaluate_all("os => os.map(o => o.value)") == ["rack-a00", "rack-a01"]
    page.click("#select-rack")  # the picker as it opened, as an operator in a hurry follows it
    page.wait_for_url(re.compile(r"/reruns/preview/"))
    visit.shoot("preview")
    shown = page.inner_text("main")
    assert "a00-n00" in shown and "b01-t00" not in shown
    assert Job.objects.count() == 0


def test_ticking_one_failure_row_previews_only_that_target(tab):
    visit, world = tab
    page = visit.page
    fail_gpu_diag_too(world)  # a00-n00 fails gpu-diag and hbm-bandwidth: two rows, one device
    visit.sign_in("operator")
    visit.go("/sites/lon-1/failures/?order=target", "failures")
    rows = page.locator('tr[data-target="a00-n00"]')
    assert rows.count() == 2
    page.locator('tr[data-target="a00-n00"][data-requirement="hbm-bandwidth"] input[type=checkbox]').check()
    visit.shoot("ticked")
    page.click("#preview-selected")
    page.wait_for_url(re.compile(r"/reruns/preview/"))
    visit.shoot("preview")
    planned = page.inner_text("table.planned")
    assert "hbm-bandwidth" in planned and "gpu-diag" not in planned
    assert Job.objects.count() == 0
