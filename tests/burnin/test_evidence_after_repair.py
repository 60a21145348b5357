"""Issue 43, item 10: the evidence after a repair. A device accepted after its repair has no failing
target any more, so its pack holds none; the evidence that sent it to repair stays reachable from
that repair — the pack as of when the repair was recorded (`?repair_id=<id>`), signed like any pack,
linked from the device page."""

from __future__ import annotations

import json

import pytest
from django.utils import timezone

from fleet.lifecycle.models import Repair
from tests.burnin.certs import evaluate_now, sweep
from tests.burnin.test_evidence_pack import DIAG_RULE, RC, bad_diag, independent_verify, members, viewer  # noqa: F401


@pytest.fixture
def repaired(fleet):
    """gpu-diag failed three times, the repair was recorded, the re-burn-in passed."""
    site = fleet.site("lon-1")
    satellite = fleet.satellite(site, "sat-a")
    policy = fleet.policy(RC)
    diag = fleet.requirement(policy, "gpu-diag", thresholds=[DIAG_RULE])
    device = fleet.device(satellite, RC, hostname="a01-n04")
    failures = [fleet.execution(diag, device=device, metrics=bad_diag(n)) for n in (1, 2, 3)]
    evaluate_now(*failures)
    sweep(satellite)
    repair = Repair.objects.create(
        device=device,
        summary="GPU 3 swapped",
        parts=[{"kind": "gpu", "slot": "3", "removed_serial": "G-OLD", "installed_serial": "G-NEW"}],
        actor="user:operator",
        created_at=timezone.now(),
    )
    evaluate_now(fleet.execution(diag, device=device, metrics=bad_diag(0)))
    sweep(satellite)
    other = fleet.device(satellite, RC, hostname="a01-n05")
    elsewhere = Repair.objects.create(device=other, summary="other", parts=[], actor="x", created_at=timezone.now())
    return device, repair, failures, elsewhere


def _manifest(viewer, device, query: str = "") -> tuple[dict, bytes]:  # noqa: F811
    response = viewer.get(f"/api/v1/devices/{device.id}/evidence-pack/{query}", HTTP_ACCEPT="application/zip")
    assert response.status_code == 200, response.content[:300]
    return json.loads(members(response.content)["manifest.json"]), response.content


def test_a_repair_s_pack_holds_the_failures_that_sent_the_device_to_repair(repaired, viewer):  # noqa: F811
    device, repair, failures, _ = repaired

    now, _ = _manifest(viewer, device)
    then, pack = _manifest(viewer, device, f"?repair_id={repair.id}")

    # Today the device passes: its pack has no failing target, and lists the repair.
    assert now["targets"] == []
    assert [r["id"] for r in now["repairs"]["records"]] == [str(repair.id)]
    # The repair's pack: the three failing attempts that sent it there, as the repair found them.
    assert then["as_of"]["repair_id"] == str(repair.id)
    (target,) = then["targets"]
    assert (target["requirement"]["name"], target["verdict"]) == ("gpu-diag", "failed")
    assert target["attempts"]["count"] == 3
    assert {e["id"] for e in target["attempts"]["executions"]} == {str(e.id) for e in failures}
    assert target["deciding_execution_id"] == str(failures[-1].id)
    assert then["repairs"]["records"] == []  # the repair itself came after
    keys = viewer.get("/api/v1/certificates/keys/").json()
    assert independent_verify(pack, keys)


def test_a_repair_of_another_device_is_a_404_and_a_malformed_one_a_400(repaired, viewer):  # noqa: F811
    device, _, _, elsewhere = repaired

    assert viewer.get(f"/api/v1/devices/{device.id}/evidence-pack/?repair_id={elsewhere.id}").status_code == 404
    assert viewer.get(f"/api/v1/devices/{device.id}/evidence-pack/?repair_id=not-a-uuid").status_code == 400


def test_the_device_page_links_each_repair_s_evidence(repaired, viewer):  # noqa: F811
    device, repair, _, _ = repaired

    page = viewer.get(f"/sites/lon-1/devices/{device.hostname}/").content.decode()

    assert f'href="/api/v1/devices/{device.id}/evidence-pack/?repair_id={repair.id}"' in page
