"""Fleet-file keys of diagnosis: `consecutive_passes` (judges: moves the version) and
`outlier_k` (diagnosis only: does not)."""

from __future__ import annotations

import pytest
import yaml

from fleet.fleetfile.document import FleetFileError
from fleet.fleetfile.export import fleet_export
from fleet.policies.models import AcceptancePolicy, Requirement
from tests.fleetfile.test_apply import EXAMPLE, apply_text, versions


def with_keys(**keys) -> str:
    doc = yaml.safe_load(EXAMPLE.read_text())
    doc["policies"][0]["requirements"][0].update(keys)
    return yaml.safe_dump(doc, sort_keys=False)


def first_requirement() -> Requirement:
    doc = yaml.safe_load(EXAMPLE.read_text())
    policy = doc["policies"][0]
    return Requirement.objects.get(
        policy__resource_class=policy["resource_class"], name=policy["requirements"][0]["name"]
    )


def test_consecutive_passes_moves_the_version_and_stamps_when(db):
    apply_text(EXAMPLE.read_text())
    before = versions()
    rc = yaml.safe_load(EXAMPLE.read_text())["policies"][0]["resource_class"]
    assert AcceptancePolicy.objects.get(resource_class=rc).version_changed_at is None
    apply_text(with_keys(consecutive_passes=2))
    assert versions()[rc] == before[rc] + 1
    assert AcceptancePolicy.objects.get(resource_class=rc).version_changed_at is not None
    assert first_requirement().consecutive_passes == 2


def test_outlier_k_is_stored_without_a_new_version(db):
    apply_text(EXAMPLE.read_text())
    before = versions()
    summary = apply_text(with_keys(outlier_k=5))
    assert versions() == before
    assert first_requirement().outlier_k == 5.0
    assert summary.counts["requirements"].updated == 1
    assert not apply_text(with_keys(outlier_k=5)).changed


def test_both_keys_round_trip_through_export(db):
    apply_text(with_keys(consecutive_passes=3, outlier_k=4.5))
    declared = yaml.safe_load(EXAMPLE.read_text())["policies"][0]
    (policy,) = [p for p in fleet_export()["policies"] if p["resource_class"] == declared["resource_class"]]
    (requirement,) = [r for r in policy["requirements"] if r["name"] == declared["requirements"][0]["name"]]
    assert (requirement["consecutive_passes"], requirement["outlier_k"]) == (3, 4.5)


@pytest.mark.parametrize(
    ("keys", "problem"),
    [
        ({"consecutive_passes": 0}, "consecutive_passes: must be a whole number from 1 to 10, got 0"),
        ({"consecutive_passes": "2"}, "consecutive_passes: must be a whole number from 1 to 10, got '2'"),
        ({"outlier_k": -1}, "outlier_k: must be a positive finite number, got -1"),
        ({"outlier_k": True}, "outlier_k: must be a positive finite number, got True"),
    ],
)
def test_bad_values_are_located_problems(db, keys, problem):
    with pytest.raises(FleetFileError) as caught:
        apply_text(with_keys(**keys))
    assert any(f"{where}: {message}".endswith(problem) for where, message in caught.value.problems), str(caught.value)
