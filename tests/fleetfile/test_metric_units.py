"""A requirement's metric definitions in the fleet file: `metrics: {name: {unit: …}}` — how pages
show its values (issue 27, finding 11). Presentation only: stored without a new policy version,
round-tripped by export, refused with its location when malformed."""

from __future__ import annotations

import pytest
import yaml

from fleet.fleetfile.document import FleetFileError
from fleet.fleetfile.export import fleet_export
from tests.fleetfile.test_apply import EXAMPLE, apply_text, versions
from tests.fleetfile.test_diagnosis_keys import first_requirement, with_keys


def test_units_are_stored_without_a_new_version_and_round_trip_through_export(db):
    apply_text(EXAMPLE.read_text())
    before = versions()
    summary = apply_text(with_keys(metrics={"diag_failed_tests": {"unit": "tests"}}))
    assert versions() == before and summary.counts["requirements"].updated == 1
    assert first_requirement().metric_units == {"diag_failed_tests": "tests"}
    assert not apply_text(with_keys(metrics={"diag_failed_tests": {"unit": "tests"}})).changed
    declared = yaml.safe_load(EXAMPLE.read_text())["policies"][0]
    (policy,) = [p for p in fleet_export()["policies"] if p["resource_class"] == declared["resource_class"]]
    (requirement,) = [r for r in policy["requirements"] if r["name"] == declared["requirements"][0]["name"]]
    assert requirement["metrics"] == {"diag_failed_tests": {"unit": "tests"}}


def test_the_example_declares_units_and_exports_them(db):
    apply_text(EXAMPLE.read_text())
    exported = yaml.safe_dump(fleet_export())
    assert "busbw_gbps:\n" in exported and "unit: GB/s" in exported


@pytest.mark.parametrize(
    ("metrics", "problem"),
    [
        ({"busbw_gbps": "GB/s"}, "metrics.busbw_gbps"),
        ({"busbw_gbps": {"unit": "G" * 17}}, "metrics.busbw_gbps.unit"),
        ({"busbw_gbps": {"scale": 2}}, "metrics.busbw_gbps.scale"),
    ],
)
def test_a_malformed_unit_is_refused_with_its_location(db, metrics, problem):
    with pytest.raises(FleetFileError) as refused:
        apply_text(with_keys(metrics=metrics))
    assert any(problem in where for where, _ in refused.value.problems), refused.value.problems
