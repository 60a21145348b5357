"""`POST /api/v1/satellites/fingerprints/`: the agent's inventory sweep reports its devices'
inventories outside any job (satellites only, each for its own devices). A changed one supersedes
the certificate (`hardware_changed`) exactly as a job's report does; a bad body is a 400 naming the
field with nothing written; a constant number of queries whatever the batch holds."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from fleet.burnin.fingerprints import fingerprint_history, satellite_fingerprints_report
from fleet.burnin.models import AcceptanceCertificate, FingerprintSnapshot
from fleet.inventory.models import Device
from fleet_rules.vocabulary import DeviceState, SupersedeReason
from tests.burnin.test_fingerprints import RC, _certified, assert_lifted_for_hardware, swapped
from tests.payloads import inventory

URL = "/api/v1/satellites/fingerprints/"
SATELLITE = ["test-execution:report"]


@pytest.fixture
def setting(fleet):
    site = fleet.site("lon-1")
    satellite = fleet.satellite(site, "sat-a")
    device = fleet.device(satellite, RC, hostname="a01-n01")
    policy = fleet.policy(RC)
    diag = fleet.requirement(policy, "gpu-diag", test="dcgm-diag")
    return satellite, device, diag


def sweep_body(*devices: tuple[str, dict], satellite: str = "sat-a") -> dict:
    return {
        "site_slug": "lon-1",
        "satellite_name": satellite,
        "devices": [{"hostname": hostname, "inventory": value} for hostname, value in devices],
    }


def test_a_swapped_gpu_read_by_the_sweep_supersedes_the_certificate_and_sends_the_device_to_burn_in(
    fleet, setting, bearer
):
    satellite, device, diag = setting
    certificate = _certified(fleet, diag, device)
    assert device.state == DeviceState.ACCEPTED
    client = bearer(SATELLITE, satellite=satellite)
    bound = FingerprintSnapshot.objects.get(device=device)

    # The sweep reads the same hardware: seen again, nothing else changes
    same = client.post(URL, sweep_body(("a01-n01", inventory())), format="json")
    assert same.status_code == 200, same.content
    assert same.json()["results"][0] | {"sha256": ""} == {
        "hostname": "a01-n01",
        "device_id": str(device.id),
        "sha256": "",
        "created": False,
        "superseded": None,
    }
    seen = FingerprintSnapshot.objects.get(device=device)
    assert seen.last_seen_at > bound.last_seen_at
    # `reports` and `last_execution` stay the execution reports'
    assert (seen.reports, seen.last_execution_id) == (bound.reports, bound.last_execution_id)
    certificate.refresh_from_db()
    assert certificate.superseded_at is None

    # Then it reads GPU 3 with another serial
    response = client.post(URL, sweep_body(("a01-n01", swapped(inventory()))), format="json")

    assert response.status_code == 200, response.content
    result = response.json()["results"][0]
    assert (result["created"], result["superseded"]) == (True, str(certificate.serial))
    assert_lifted_for_hardware(certificate, device)
    history = fingerprint_history(device.id)
    assert [f.current for f in history.fingerprints] == [True, False]
    assert history.fingerprints[0].last_execution_id is None  # read outside any job


def test_an_in_service_device_swept_with_other_hardware_loses_its_certificate(fleet, setting, bearer):
    satellite, device, diag = setting
    certificate = _certified(fleet, diag, device)
    Device.objects.filter(id=device.id).update(state=DeviceState.IN_SERVICE)

    response = bearer(SATELLITE, satellite=satellite).post(
        URL, sweep_body(("a01-n01", swapped(inventory()))), format="json"
    )

    assert response.status_code == 200, response.content
    certificate.refresh_from_db()
    assert certificate.supersede_reason == SupersedeReason.HARDWARE_CHANGED


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"site_slug": "lon-1", "satellite_name": "sat-a", "devices": []}, "devices"),
        ({"site_slug": "lon-1", "satellite_name": "sat-a"}, "devices"),
        (sweep_body(("a01-n01", inventory(driver_version=7))), "devices.0.inventory.driver_version"),
        (sweep_body(("a01-n01", {**inventory(), "extra": 1})), "devices.0.inventory.extra"),
        (sweep_body(("a01-n01", inventory()), ("a01-n01", inventory())), "devices.1.hostname"),
        (sweep_body(*[(f"h{i}", inventory()) for i in range(101)]), "devices"),
        (sweep_body(("a01-n01", inventory()), ("nobody", inventory())), "devices.1.hostname"),
        ({**sweep_body(("a01-n01", inventory())), "site_slug": "no site"}, "site_slug"),
    ],
)
def test_a_bad_sweep_is_a_400_naming_the_field_and_writes_nothing(fleet, setting, bearer, body, field):
    satellite, *_ = setting

    response = bearer(SATELLITE, satellite=satellite).post(URL, body, format="json")

    assert response.status_code == 400, response.content
    fields = [error["field"] for error in response.json()["field_errors"]]
    assert field in fields, response.json()
    assert not FingerprintSnapshot.objects.exists()


def test_only_the_satellites_own_client_may_report_its_devices(fleet, setting, bearer):
    satellite, device, _ = setting
    other = fleet.satellite(satellite.site, "sat-b")
    fleet.device(other, RC, hostname="b-n01")
    body = sweep_body(("a01-n01", inventory()))

    # a person's or an operator's client holding the scope and permission is refused
    assert bearer(SATELLITE).post(URL, body, format="json").status_code == 403
    # another satellite's client may not act as sat-a
    assert bearer(SATELLITE, satellite=other, name="sat-b").post(URL, body, format="json").status_code == 403
    # and sat-a may not report sat-b's device (the whole matrix: tests/inventory/test_satellite_writes.py)
    mine = bearer(SATELLITE, satellite=satellite, name="sat-a")
    theirs = mine.post(URL, sweep_body(("a01-n01", inventory()), ("b-n01", inventory())), format="json")
    assert (theirs.status_code, theirs.json()["code"]) == (403, "permission_denied")
    assert "b-n01" in theirs.json()["detail"]
    assert not FingerprintSnapshot.objects.exists()


def _queries(satellite, devices: list[Device], swap: bool) -> int:
    body = [{"hostname": d.hostname, "inventory": swapped(inventory()) if swap else inventory()} for d in devices]
    with CaptureQueriesContext(connection) as queries:
        satellite_fingerprints_report(satellite=satellite, devices=body, now=timezone.now(), actor=None)
    return len(queries)


def test_a_sweep_takes_the_same_queries_for_2_and_12_devices(fleet, setting):
    satellite, device, diag = setting
    counts = []
    for size, prefix in ((2, "s"), (12, "l")):
        devices = [fleet.device(satellite, RC, hostname=f"{prefix}{i:02d}") for i in range(size)]
        for d in devices:
            _certified(fleet, diag, d)
        first = _queries(satellite, devices, swap=False)  # the certified fingerprint again: counted
        changed = _queries(satellite, devices, swap=True)  # all swapped: superseded, back to burn-in
        counts.append((first, changed))
        assert (
            AcceptanceCertificate.objects.filter(
                device__in=devices, supersede_reason=SupersedeReason.HARDWARE_CHANGED
            ).count()
            == size
        )
        assert set(Device.objects.filter(id__in=[d.id for d in devices]).values_list("state", flat=True)) == {
            DeviceState.BURN_IN
        }
    assert counts[0] == counts[1], counts
