"""Fleet as code: idempotent apply, whole-file validation, version bumps, export round trip."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
import yaml
from django.core.management import CommandError, call_command

from fleet.burnin.models import TestExecution
from fleet.fleetfile.apply import fleet_apply
from fleet.fleetfile.document import FleetFileError, parse_text
from fleet.fleetfile.export import fleet_export, to_yaml
from fleet.inventory.models import Device, Satellite, Site, Topology, TopologyMembership
from fleet.lifecycle.models import DeviceStateChange
from fleet.policies.models import AcceptancePolicy, ParameterProfile, Requirement, ThresholdRule
from fleet_rules.vocabulary import DeviceState, TransitionCause

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "fleet.yaml"


def apply_text(text: str, **kwargs):
    return fleet_apply(document=parse_text(text), **kwargs)


def versions() -> dict[str, int]:
    return dict(AcceptancePolicy.objects.values_list("resource_class", "version"))


def database_snapshot() -> dict[str, int]:
    return {
        m.__name__: m.objects.count()
        for m in (
            Site,
            Satellite,
            Topology,
            Device,
            TopologyMembership,
            AcceptancePolicy,
            Requirement,
            ThresholdRule,
            ParameterProfile,
        )
    }


def test_applying_the_example_twice_changes_nothing_the_second_time(db):
    first = apply_text(EXAMPLE.read_text())
    assert first.counts["devices"].created == 39
    assert first.counts["policies"].created == 3
    before = versions()
    second = apply_text(EXAMPLE.read_text())
    assert not second.changed
    assert all(c.created == c.updated == c.removed == 0 for c in second.counts.values())
    assert second.counts["devices"].unchanged == 39
    assert versions() == before == {"gpu.gb200.nvl72": 1, "gpu.h200.8x": 1, "gpu.mi300x.8x": 1}


def test_changing_one_threshold_bumps_only_that_policy_once(db):
    apply_text(EXAMPLE.read_text())
    changed = EXAMPLE.read_text().replace("threshold: 431}", "threshold: 440}")
    assert changed != EXAMPLE.read_text()
    summary = apply_text(changed)
    assert versions() == {"gpu.gb200.nvl72": 1, "gpu.h200.8x": 2, "gpu.mi300x.8x": 1}
    assert summary.counts["thresholds"].updated == 1
    assert summary.policy_versions == {"gpu.h200.8x": (1, 2)}
    apply_text(changed)
    assert versions() == {"gpu.gb200.nvl72": 1, "gpu.h200.8x": 2, "gpu.mi300x.8x": 1}


def test_several_changes_to_one_policy_are_one_version(db):
    apply_text(EXAMPLE.read_text())
    text = (
        EXAMPLE.read_text()
        .replace("threshold: 431}", "threshold: 440}")
        .replace(
            "{metric: h2d_gbps, statistic: min, comparator: gte, threshold: 48}",
            "{metric: h2d_gbps, statistic: min, comparator: gte, threshold: 50}",
        )
        .replace(
            "parameter_constraints: {duration_s: {gte: 60}}\n        thresholds:\n"
            "          - {metric: hbm_bandwidth_tbps, statistic: min, comparator: gte, threshold: 3.6}",
            "parameter_constraints: {duration_s: {gte: 90}}\n        thresholds:\n"
            "          - {metric: hbm_bandwidth_tbps, statistic: min, comparator: gte, threshold: 3.6}",
        )
    )
    apply_text(text)
    assert versions()["gpu.h200.8x"] == 2


def test_a_site_override_change_bumps_the_version(db):
    apply_text(EXAMPLE.read_text())
    apply_text(EXAMPLE.read_text().replace("threshold: 350, site: lon-1}", "threshold: 345, site: lon-1}"))
    assert versions()["gpu.h200.8x"] == 2


def test_a_requirement_absent_from_the_file_is_retired_and_bumps_the_version(db):
    apply_text(EXAMPLE.read_text())
    doc = yaml.safe_load(EXAMPLE.read_text())
    doc["policies"][0]["requirements"] = [r for r in doc["policies"][0]["requirements"] if r["name"] != "ib-bandwidth"]
    summary = apply_text(yaml.safe_dump(doc))
    retired = Requirement.objects.get(policy__resource_class="gpu.h200.8x", name="ib-bandwidth")
    assert retired.retired_at is not None
    assert summary.counts["requirements"].removed == 1
    assert versions()["gpu.h200.8x"] == 2


def test_parameter_profile_changes_do_not_bump_versions(db):
    apply_text(EXAMPLE.read_text())
    summary = apply_text(EXAMPLE.read_text().replace("parameters: {duration_s: 120}", "parameters: {duration_s: 180}"))
    assert summary.counts["parameter_profiles"].updated == 2
    assert versions() == {"gpu.gb200.nvl72": 1, "gpu.h200.8x": 1, "gpu.mi300x.8x": 1}


BROKEN = """
sites:
  - slug: "bad slug"
    satellites: [{name: sat-a}, {name: sat-a}]
    topologies:
      - {unit: rack, label: r1, satellite: sat-a}
      - {unit: shelf, label: r2, satellite: sat-a}
    devices:
      - {hostname: n1, resource_class: gpu.h200.8x, satellite: sat-z, state: burn_in, enrolled: true}
      - {hostname: n2, resource_class: gpu.h200.8x, satellite: sat-a, state: melted, topologies: {rack: nope}}
      - {hostname: n3, resource_class: gpu.h200.8x, satelite: sat-a}
      - {hostname: n4, satellite: sat-a}
policies:
  - resource_class: gpu.h200.8x
    requirements:
      - name: diag
        gate: Burn In
        scope: single_node
        test: dcgm-diag
        thresholds: [{metric: x, comparator: gte, threshold: "high"}]
      - name: rack
        gate: burn-in
        scope: multi_node
        test: nccl
        thresholds: [{metric: busbw, comparator: approx, threshold: 1}]
"""

EXPECTED_PROBLEMS = {
    "sites[0].slug",
    "sites[0].satellites[1].name",
    "sites[0].topologies[1].unit",
    "sites[0].devices[0].satellite",
    "sites[0].devices[1].state",
    "sites[0].devices[1].topologies.rack",
    "sites[0].devices[2].satelite",
    "sites[0].devices[2].satellite",
    "sites[0].devices[3].resource_class",
    "policies[0].requirements[0].gate",
    "policies[0].requirements[0].thresholds[0].threshold",
    "policies[0].requirements[1].unit",
    "policies[0].requirements[1].gate",
    "policies[0].requirements[1].thresholds[0].comparator",
}


def test_a_file_with_several_errors_reports_each_with_its_location_and_writes_nothing(db):
    apply_text(EXAMPLE.read_text())
    before = database_snapshot()
    with pytest.raises(FleetFileError) as caught:
        apply_text(BROKEN)
    assert {where for where, _ in caught.value.problems} == EXPECTED_PROBLEMS
    assert database_snapshot() == before


def test_the_command_prints_every_problem_and_fails(db, tmp_path):
    path = tmp_path / "broken.yaml"
    path.write_text(BROKEN)
    err = io.StringIO()
    with pytest.raises(CommandError, match="14 problem"):
        call_command("apply", "-f", str(path), stderr=err)
    output = err.getvalue()
    assert "sites[0].devices[3].resource_class: is required" in output
    assert f"{path}: sites[0].devices[1].state: 'melted' is not one of" in output
    assert Site.objects.count() == 0


def test_an_override_for_an_unknown_site_is_refused_before_writing(db):
    text = EXAMPLE.read_text().replace("site: lon-1}", "site: nowhere}")
    with pytest.raises(FleetFileError) as caught:
        apply_text(text)
    assert [w for w, _ in caught.value.problems] == [
        "policies[0].requirements[5].thresholds[1].site",
        "policies[1].requirements[5].thresholds[1].site",
    ]
    assert Site.objects.count() == 0


def test_invalid_yaml_is_reported_with_its_line(db):
    with pytest.raises(FleetFileError) as caught:
        apply_text("sites:\n  - slug: [unclosed\n")
    assert caught.value.problems[0][0].startswith("line ")


def test_dry_run_reports_the_summary_and_writes_nothing(db):
    summary = apply_text(EXAMPLE.read_text(), dry_run=True)
    assert summary.counts["devices"].created == 39
    assert Device.objects.count() == 0 and AcceptancePolicy.objects.count() == 0
    out = io.StringIO()
    call_command("apply", "-f", str(EXAMPLE), "--dry-run", stdout=out)
    assert "dry run" in out.getvalue()
    assert Device.objects.count() == 0


def _wipe():
    TopologyMembership.objects.all().delete()
    Device.objects.all().delete()
    Topology.objects.all().delete()
    Satellite.objects.all().delete()
    ThresholdRule.objects.all().delete()
    Requirement.objects.all().delete()
    AcceptancePolicy.objects.all().delete()
    ParameterProfile.objects.all().delete()
    Site.objects.all().delete()


def test_export_apply_export_round_trip_is_identical(db):
    apply_text(EXAMPLE.read_text())
    doc = yaml.safe_load(EXAMPLE.read_text())
    doc["policies"][0]["requirements"][0]["retired"] = True
    doc["policies"][0]["requirements"][1]["rerunnable"] = False
    apply_text(yaml.safe_dump(doc))
    first = to_yaml(fleet_export())
    _wipe()
    assert Device.objects.count() == 0
    apply_text(first)
    second = to_yaml(fleet_export())
    assert second == first
    out = io.StringIO()
    call_command("export", stdout=out)
    assert out.getvalue() == first
    assert yaml.safe_load(first)["policies"][0]["requirements"]  # not empty


def test_devices_absent_from_the_file_are_left_alone_unless_pruned(db):
    apply_text(EXAMPLE.read_text())
    doc = yaml.safe_load(EXAMPLE.read_text())
    devices = doc["sites"][0]["devices"]
    doc["sites"][0]["devices"] = [d for d in devices if d["hostname"] not in {"a01-n01", "a01-n02"}]
    doc["sites"][0]["topologies"] = [t for t in doc["sites"][0]["topologies"] if t["label"] != "rack-a04"]
    for d in doc["sites"][0]["devices"]:
        if d.get("topologies", {}).get("rack") == "rack-a04":
            del d["topologies"]["rack"]
    text = yaml.safe_dump(doc)
    apply_text(text)
    assert Device.objects.filter(hostname__in=["a01-n01", "a01-n02"]).count() == 2
    assert Topology.objects.filter(label="rack-a04").exists()

    from tests.builders import FleetBuilder  # noqa: F401  (history for one of them)

    kept = Device.objects.get(hostname="a01-n01")
    requirement = Requirement.objects.get(policy__resource_class="gpu.h200.8x", name="gpu-diag")
    from django.utils import timezone

    TestExecution.objects.create(
        id="00000000-0000-0000-0000-0000000000aa",
        site=kept.site,
        requirement=requirement,
        test="dcgm-diag",
        device=kept,
        status="completed",
        created_at=timezone.now(),
        updated_at=timezone.now(),
    )
    summary = apply_text(text, prune=True)
    assert not Device.objects.filter(hostname="a01-n02").exists()
    kept.refresh_from_db()
    assert kept.state == DeviceState.DECOMMISSIONED
    # decommissioned through the lifecycle's writer: its history says so (pruning wrote none)
    (change,) = DeviceStateChange.objects.filter(device=kept)
    assert (change.to_state, change.cause) == (DeviceState.DECOMMISSIONED, TransitionCause.FLEET_FILE)
    assert "--prune" in change.reason
    assert not Topology.objects.filter(label="rack-a04").exists()
    assert summary.counts["devices"].removed == 2
    assert any("a01-n01" in note for note in summary.notes)


def test_values_json_cannot_store_and_blank_statistics_are_located_problems(db):
    text = (
        EXAMPLE.read_text()
        .replace("parameters: {level: 3}}", "parameters: {level: 3, since: 2026-11-30, ratio: .nan}}", 1)
        .replace(
            "{metric: bw_gbps, statistic: min, comparator: gte, threshold: 360}",
            "{metric: bw_gbps, statistic: '', comparator: gte, threshold: 360}",
            1,
        )
    )
    with pytest.raises(FleetFileError) as caught:
        apply_text(text)
    problems = dict(caught.value.problems)
    assert set(problems) == {
        "parameter_profiles[0].parameters.since",
        "parameter_profiles[0].parameters.ratio",
        "policies[0].requirements[5].thresholds[0].statistic",
    }
    assert "quote it" in problems["parameter_profiles[0].parameters.since"]
    assert Site.objects.count() == 0


def test_export_to_a_file_says_what_it_wrote_and_refuses_an_unwritable_path(db, tmp_path):
    fleet_apply(document=parse_text(EXAMPLE.read_text()))
    target = tmp_path / "fleet.yaml"
    out = io.StringIO()
    call_command("export", "-o", str(target), stdout=out)
    assert out.getvalue().strip() == (
        f"Wrote {target}: 1 site(s), 39 device(s), 3 policy(ies), 21 parameter profile(s)."
    )
    assert parse_text(target.read_text())  # what it wrote is a fleet file
    with pytest.raises(CommandError, match="cannot write"):
        call_command("export", "-o", str(tmp_path / "missing-folder" / "fleet.yaml"), stdout=io.StringIO())


def test_an_apply_that_changed_something_leaves_fresh_planner_statistics(db):
    from django.db import connection

    with connection.cursor() as cursor:
        # Statistics outlive the test transactions: start from the empty table's, whatever ran before.
        cursor.execute(f'ANALYZE "{Device._meta.db_table}"')
        cursor.execute("SELECT reltuples FROM pg_class WHERE relname = %s", [Device._meta.db_table])
        before = cursor.fetchone()[0]
        apply_text(EXAMPLE.read_text())
        cursor.execute("SELECT reltuples FROM pg_class WHERE relname = %s", [Device._meta.db_table])
        after = cursor.fetchone()[0]
    assert before != Device.objects.count()
    assert after == Device.objects.count()  # ANALYZE ran on what the apply wrote
