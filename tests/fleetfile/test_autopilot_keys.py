"""A site's `autopilot:` in the fleet file: stored, exported identically (round trip), shown by
`--what-if` before it is applied, refused with the field named when wrong; a pause stays."""

from __future__ import annotations

import io
import json
from datetime import timedelta

import pytest
import yaml
from django.core.management import call_command

from fleet.autopilot.models import SiteAutopilot
from fleet.autopilot.services import autopilot_pause
from fleet.fleetfile.document import FleetFileError
from fleet.fleetfile.export import fleet_export, to_yaml
from tests.fleetfile.test_apply import EXAMPLE, _wipe, apply_text

SETTINGS = {
    "enabled": True,
    "max_under_test": 32,
    "rack_share": 0.5,
    "backoff": "2m",
    "isolate": False,
    "renew_before": "3d",
    "class_limits": {"gpu.h200.8x": 16},
}


def with_autopilot(**keys) -> str:
    doc = yaml.safe_load(EXAMPLE.read_text())
    doc["sites"][0]["autopilot"] = keys
    return yaml.safe_dump(doc, sort_keys=False)


def test_the_settings_are_stored_and_exported_and_the_round_trip_is_identical(db):
    apply_text(with_autopilot(**SETTINGS))
    row = SiteAutopilot.objects.get()
    assert (row.enabled, row.max_under_test, row.rack_share, row.backoff, row.isolate, row.renew_before) == (
        True,
        32,
        0.5,
        timedelta(minutes=2),
        False,
        timedelta(days=3),
    )
    assert row.class_limits == {"gpu.h200.8x": 16}
    assert fleet_export()["sites"][0]["autopilot"] == SETTINGS
    first = to_yaml(fleet_export())
    _wipe()
    apply_text(first)
    assert to_yaml(fleet_export()) == first


def test_a_file_that_says_nothing_turns_it_off_and_a_pause_stays(db):
    apply_text(with_autopilot(enabled=True))
    site = SiteAutopilot.objects.get().site
    autopilot_pause(site=site, actor="user:ops", reason="cooling work")
    apply_text(EXAMPLE.read_text())
    row = SiteAutopilot.objects.get()
    assert not row.enabled and row.paused_by == "user:ops"
    assert "autopilot" not in fleet_export()["sites"][0]


def test_what_if_shows_the_changes_and_writes_nothing(db, tmp_path):
    apply_text(EXAMPLE.read_text())
    path = tmp_path / "fleet.yaml"
    path.write_text(with_autopilot(enabled=True, max_under_test=8))
    out = io.StringIO()
    call_command("apply", "-f", str(path), "--what-if", "--json", stdout=out)
    slug = yaml.safe_load(EXAMPLE.read_text())["sites"][0]["slug"]
    assert json.loads(out.getvalue())["autopilot"] == [
        f"{slug}: autopilot enabled off → on",
        f"{slug}: autopilot max_under_test 64 → 8",
    ]
    assert not SiteAutopilot.objects.exists()


@pytest.mark.parametrize(
    ("keys", "field", "message"),
    [
        ({"rack_share": 1.5}, "rack_share", "must be a share of a rack's devices, above 0 and at most 1, got 1.5"),
        ({"max_under_test": 0}, "max_under_test", "must be a whole number from 1 to 1000000, got 0"),
        ({"backoff": "soon"}, "backoff", "must be a duration such as 30d, 12h, 90m or 3600s, got 'soon'"),
        ({"class_limits": {"gpu": 0}}, "class_limits.gpu", "must be a whole number of devices ≥ 1, got 0"),
        ({"pilot": True}, "pilot", "unknown key"),
    ],
)
def test_a_wrong_setting_is_refused_with_its_field_named_and_nothing_written(db, keys, field, message):
    with pytest.raises(FleetFileError) as refused:
        apply_text(with_autopilot(**keys))
    assert [(w, m) for w, m in refused.value.problems if w.endswith(f".autopilot.{field}") and message in m], (
        refused.value.problems
    )
    assert not SiteAutopilot.objects.exists()
