"""Filters are choices, not free text (issue 27, findings 1, 6 and 9): every filter is a select of
what exists at the site, an unknown value in a URL is a 400 naming it with the known ones listed
(never an empty list under good news), the grid opens on the class in trouble, its pickers hold
only the filtered class and satellite, and a ticked failure row reruns that row's target only."""

from __future__ import annotations

import re

import pytest

from fleet.burnin.models import PolicyProgress
from fleet.inventory.models import Device
from fleet.jobs.models import Job
from fleet_rules.vocabulary import Verdict
from tests.dashboard.conftest import OPERATOR, VIEWER, preview, preview_and_dispatch
from tests.dashboard.more_classes import GB200, add_green_gb200_domain, add_h200_rack_on_sat_b, fail_gpu_diag_too
from tests.dashboard.test_pages import _post, shown, text


@pytest.fixture
def two_classes(burnt_in):
    """The burnt-in H200 site (failing), a green GB200 NVLink domain, and sat-b's H200 rack."""
    add_green_gb200_domain(burnt_in)
    add_h200_rack_on_sat_b(burnt_in)
    return burnt_in


def options(page: str, select: str) -> list[str]:
    """The values a `<select name=…>` (or one with this aria-label) offers, in order."""
    found = re.search(rf"<select [^>]*(?:name|aria-label)=\"{re.escape(select)}\"[^>]*>(.*?)</select>", page)
    assert found, f"no select {select!r}"
    return re.findall(r'<option value="([^"]*)"', found.group(1))


def selected(page: str, select: str) -> str:
    found = re.search(rf"<select [^>]*name=\"{re.escape(select)}\"[^>]*>(.*?)</select>", page)
    assert found, f"no select {select!r}"
    chosen = re.findall(r'<option value="([^"]*)" selected', found.group(1))
    return chosen[0] if chosen else ""


# --- selects of what exists -------------------------------------------------------------------------


def test_the_failures_filters_are_selects_of_what_exists_at_the_site(person, two_classes):
    page = text(person(VIEWER).get("/sites/lon-1/failures/"))
    assert options(page, "resource_class") == ["", GB200, "gpu.h200.8x"]
    assert options(page, "requirement") == ["", "gpu-diag", "hbm-bandwidth", "nvl-nccl", "rack-nccl", "tray-diag"]
    assert options(page, "satellite") == ["", "sat-a", "sat-b"]
    assert options(page, "verdict") == ["", "failed", "errored"]
    scoped = text(person(VIEWER, username="v2").get(f"/sites/lon-1/failures/?resource_class={GB200}"))
    assert options(scoped, "requirement") == ["", "nvl-nccl", "tray-diag"]  # the chosen class's own


def test_the_grid_filters_are_selects_of_what_exists(person, two_classes):
    page = text(person(VIEWER).get("/sites/lon-1/grid/"))
    assert options(page, "resource_class") == [GB200, "gpu.h200.8x"]
    assert options(page, "satellite") == ["", "sat-a", "sat-b"]
    assert options(page, "verdict") == ["", *Verdict.values]
    assert options(page, "topology") == ["", "rack-a00", "rack-a01", "rack-b00"]


def test_the_jobs_list_offers_the_sites_as_a_select(person, two_classes):
    page = text(person(VIEWER).get("/jobs/"))
    assert options(page, "site") == ["", "lon-1"]
    assert selected(text(person(VIEWER, username="v2").get("/jobs/?site=lon-1")), "site") == "lon-1"


def test_known_filters_still_filter(person, two_classes):
    viewer = person(VIEWER)
    page = shown(viewer.get("/sites/lon-1/failures/?resource_class=gpu.h200.8x&requirement=hbm-bandwidth&order=target"))
    assert re.findall(r'data-target="([^"]+)"', page) == ["a00-n00", "a01-n00"]
    assert "Nothing failed" not in page
    green = shown(viewer.get(f"/sites/lon-1/failures/?resource_class={GB200}"))
    assert "Nothing failed" in green  # true: the GB200 domain passed everything
    sat_b = text(viewer.get("/sites/lon-1/grid/?resource_class=gpu.h200.8x&satellite=sat-b"))
    assert re.findall(r'data-hostname="([^"]+)"', sat_b) == ["b00-n00", "b00-n01"]


# --- an unknown value is a 400 naming it, the known ones listed ---------------------------------------

FAILURES_UNKNOWN = [
    ("resource_class=h200", "unknown resource class 'h200'", f"{GB200}, gpu.h200.8x"),
    ("requirement=nvbandwidth", "unknown requirement 'nvbandwidth'", "gpu-diag, hbm-bandwidth, nvl-nccl"),
    (f"resource_class={GB200}&requirement=hbm-bandwidth", "unknown requirement 'hbm-bandwidth'", "nvl-nccl, tray-diag"),
    ("satellite=sat-z", "unknown satellite 'sat-z'", "sat-a, sat-b"),
    ("verdict=passed", "unknown verdict 'passed'", "failed, errored"),
    ("order=sideways", "unknown order 'sideways'", "newest, oldest, target, requirement"),
    ("page=-1", "page:", ""),
    ("page=two", "page:", ""),
]


@pytest.mark.parametrize(("query", "message", "known"), FAILURES_UNKNOWN)
@pytest.mark.parametrize("path", ["/sites/lon-1/failures/", "/sites/lon-1/failures.csv"])
def test_an_unknown_failures_filter_is_a_400_listing_the_known_values(person, two_classes, path, query, message, known):
    response = person(VIEWER).get(f"{path}?{query}")
    assert response.status_code == 400
    page = shown(response)
    assert message in page and known in page
    assert "Nothing failed" not in page and 'data-target="' not in page


GRID_UNKNOWN = [
    ("resource_class=bogus", "unknown resource class 'bogus'", f"{GB200}, gpu.h200.8x"),
    ("topology=rack-z99", "unknown rack / topology 'rack-z99'", "rack-a00, rack-a01, rack-b00"),
    (
        "resource_class=gpu.h200.8x&topology=nvl72-b01",
        "unknown rack / topology 'nvl72-b01'",
        "rack-a00, rack-a01, rack-b00",
    ),
    ("satellite=sat-a&topology=rack-b00", "unknown rack / topology 'rack-b00'", "rack-a00, rack-a01"),
    ("satellite=sat-z", "unknown satellite 'sat-z'", "sat-a, sat-b"),
    ("verdict=green", "unknown verdict 'green'", "passed, failed, errored"),
]


def test_a_class_with_more_racks_than_a_picker_lists_is_filtered_by_typing_a_label(person, two_classes, monkeypatch):
    """At 100,000 devices a class holds 12,500 racks: two selects of them were 2 MB of every grid
    page. Past `RACK_CHOICES` the filter is a typed label (the first ones suggested), checked by
    a lookup, and the rerun picker offers the racks of the page's devices."""
    monkeypatch.setattr("fleet.burnin.reads.filters.RACK_CHOICES", 2)
    monkeypatch.setattr("fleet.dashboard.views.GRID_PAGE", 2)
    operator = person(OPERATOR)

    page = text(operator.get("/sites/lon-1/grid/"))
    assert re.search(r'<input name="topology" list="rack-labels"', page)
    assert '<select name="topology"><option value="">any' not in page  # the filter's select is gone
    suggested = re.search(r'<datalist id="rack-labels">(.*?)</datalist>', page).group(1)
    assert re.findall(r'<option value="([^"]*)"', suggested) == ["rack-a00", "rack-a01"]
    shown_hosts = re.findall(r'data-hostname="([^"]+)"', page)
    assert options(page, "rack to rerun") == sorted(
        set(Device.objects.filter(hostname__in=shown_hosts).values_list("memberships__topology__label", flat=True))
    )

    beyond = text(operator.get("/sites/lon-1/grid/?topology=rack-b00"))  # not among the suggested
    in_rack = set(Device.objects.filter(memberships__topology__label="rack-b00").values_list("hostname", flat=True))
    assert set(re.findall(r'data-hostname="([^"]+)"', beyond)) <= in_rack and 'value="rack-b00"' in beyond
    assert options(beyond, "rack to rerun") == ["rack-b00"]

    unknown = operator.get("/sites/lon-1/grid/?topology=rack-z99")
    assert unknown.status_code == 400
    assert "unknown rack / topology 'rack-z99' (known: rack-a00, rack-a01 and more)" in shown(unknown)


@pytest.mark.parametrize(("query", "message", "known"), GRID_UNKNOWN)
def test_an_unknown_grid_filter_is_a_400_listing_the_known_values(person, two_classes, query, message, known):
    response = person(VIEWER).get(f"/sites/lon-1/grid/?{query}")
    assert response.status_code == 400
    page = shown(response)
    assert message in page and known in page
    assert "No device matches" not in page and 'data-hostname="' not in page


def test_an_unknown_site_on_the_jobs_list_is_a_400_not_every_job(person, two_classes):
    operator = person(OPERATOR)
    assert preview_and_dispatch(operator, {"select": "every-failing-device"}).status_code == 303
    assert Job.objects.exists()
    response = operator.get("/jobs/?site=unknown")
    assert response.status_code == 400
    page = shown(response)
    assert "unknown site 'unknown'" in page and "lon-1" in page
    assert not any(str(job.id) in page for job in Job.objects.all())


@pytest.mark.parametrize(
    "path", ["/sites/lon-1/grid/", "/sites/lon-1/failures/", "/sites/lon-1/failures.csv", "/jobs/"]
)
def test_a_misspelt_parameter_is_a_400_not_a_filter_silently_ignored(person, two_classes, path):
    response = person(VIEWER).get(f"{path}?resourceclass=gpu.h200.8x")
    assert response.status_code == 400
    assert "unknown parameter 'resourceclass'" in shown(response)


def test_the_grids_live_part_still_refreshes_with_its_filters(person, two_classes):
    fragment = text(person(VIEWER).get("/sites/lon-1/grid/?satellite=sat-b&fragment=grid", HTTP_HX_REQUEST="true"))
    assert fragment.strip().startswith('<div id="grid"')
    assert re.findall(r'data-hostname="([^"]+)"', fragment) == ["b00-n00", "b00-n01"]


def test_a_long_or_hostile_unknown_value_is_shown_short_and_escaped(person, two_classes):
    response = person(VIEWER).get("/sites/lon-1/failures/?requirement=<script>" + "x" * 500)
    assert response.status_code == 400
    page = text(response)
    assert "<script>" not in page.split("</head>")[-1] and "&lt;script&gt;" in page
    assert "x" * 200 not in page


# --- the grid opens where the trouble is; its pickers hold the filtered class and satellite ----------


def test_the_grid_opens_on_the_class_with_the_most_failing_targets(person, two_classes):
    page = text(person(VIEWER).get("/sites/lon-1/grid/"))
    assert selected(page, "resource_class") == "gpu.h200.8x"
    assert "a00-n00" in re.findall(r'data-hostname="([^"]+)"', page)
    assert 'data-hostname="b01-t00"' not in page


def test_a_grid_with_nothing_failing_opens_on_the_first_class(person, two_classes):
    PolicyProgress.objects.filter(verdict__in=[Verdict.FAILED, Verdict.ERRORED]).update(verdict=Verdict.PASSED)
    page = text(person(VIEWER).get("/sites/lon-1/grid/"))
    assert selected(page, "resource_class") == GB200


def test_the_rack_pickers_hold_only_the_filtered_class_and_satellite(person, two_classes):
    operator = person(OPERATOR)
    h200 = text(operator.get("/sites/lon-1/grid/"))
    assert options(h200, "rack to rerun") == ["rack-a00", "rack-a01", "rack-b00"]
    sat_b = text(operator.get("/sites/lon-1/grid/?satellite=sat-b"))
    assert options(sat_b, "rack to rerun") == ["rack-b00"]
    assert options(sat_b, "topology") == ["", "rack-b00"]
    gb200 = text(operator.get(f"/sites/lon-1/grid/?resource_class={GB200}"))
    assert options(gb200, "rack to rerun") == ["nvl72-b01"]


# --- a failures row is a target ---------------------------------------------------------------------


def test_a_ticked_failure_row_previews_and_dispatches_that_target_only(person, two_classes):
    fail_gpu_diag_too(two_classes)  # a00-n00 now fails gpu-diag and hbm-bandwidth
    operator = person(OPERATOR)
    page = text(operator.get("/sites/lon-1/failures/?order=target"))
    device = Device.objects.get(hostname="a00-n00")
    boxes = re.findall(r'<input type="checkbox" name="target" value="([^"]+)"', page)
    assert f"{device.id}:gpu-diag" in boxes and f"{device.id}:hbm-bandwidth" in boxes

    _, page = preview(operator, {"target": f"{device.id}:hbm-bandwidth"})
    planned = page[page.index('class="planned"') :].split("</table>")[0]
    assert "hbm-bandwidth" in planned and "gpu-diag" not in planned
    assert Job.objects.count() == 0

    assert preview_and_dispatch(operator, {"target": f"{device.id}:hbm-bandwidth"}).status_code == 303
    job = Job.objects.get()
    assert job.requirement_names == ["hbm-bandwidth"]


def test_ticking_a_devices_whole_row_on_the_grid_still_reruns_all_its_failures(person, two_classes):
    fail_gpu_diag_too(two_classes)
    operator = person(OPERATOR)
    device = Device.objects.get(hostname="a00-n00")
    assert preview_and_dispatch(operator, {"device": str(device.id)}).status_code == 303
    assert sorted(Job.objects.get().requirement_names) == ["gpu-diag", "hbm-bandwidth"]


@pytest.mark.parametrize(
    ("target", "message"),
    [
        ("not-a-target", "is not a target"),
        ("00000000-0000-4000-8000-000000000000:gpu-diag", "is not a device of site lon-1"),
        ("{a00}:tray-diag", "has no requirement 'tray-diag'"),
    ],
)
def test_a_bad_target_is_a_400_and_creates_nothing(person, two_classes, target, message):
    device = Device.objects.get(hostname="a00-n00")
    operator = person(OPERATOR)
    kept = _post(operator, "/sites/lon-1/reruns/preview/", {"target": target.format(a00=device.id)})
    if kept.status_code == 303:  # a well-formed target is kept under a token; its preview page refuses it
        kept = operator.get(kept["Location"])
    assert kept.status_code == 400
    assert message in shown(kept)
    assert Job.objects.count() == 0
