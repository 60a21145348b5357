"""The device page's hardware fingerprint: the current inventory, its history with what changed,
each repair's parts checked against the hardware read after it; hostile text escaped; a constant
number of queries whatever the inventory and its history hold."""

from __future__ import annotations

import copy
from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from fleet.lifecycle.models import Repair
from tests.dashboard.conftest import VIEWER
from tests.dashboard.test_pages import shown, text
from tests.payloads import inventory

FINGERPRINT_VIEWER = [*VIEWER, "burnin.view_fingerprintsnapshot"]
HOSTILE = '<script>alert("gpu")</script>'


@pytest.fixture
def device(fleet):
    site = fleet.site("lon-1", "London 1")
    satellite = fleet.satellite(site, "sat-a")
    device = fleet.device(satellite, "gpu.h200.8x", hostname="a00-n00")
    diag = fleet.requirement(fleet.policy("gpu.h200.8x"), "gpu-diag")
    return device, diag


def _history(fleet, device, diag, *, gpus: int, changes: int) -> None:
    """The device reports `changes` + 1 fingerprints; a repair between the last two says it swapped
    GPU 3 (true) and GPU 4 (not true)."""
    value = inventory(gpus=gpus)
    fleet.execution(diag, device=device, status="running", inventory=value)
    for n in range(changes):
        value = copy.deepcopy(value)
        value["gpus"][3]["serial"] = f"16530200{n:05d}"
        if n == changes - 1:
            Repair.objects.create(
                device=device,
                summary="swapped GPU 3",
                parts=[
                    {"kind": "gpu", "slot": "3", "removed_serial": "", "installed_serial": value["gpus"][3]["serial"]},
                    {
                        "kind": "gpu",
                        "slot": "4",
                        "removed_serial": value["gpus"][4]["serial"],
                        "installed_serial": "1653029999999",
                    },
                ],
                actor="user:tech",
                created_at=timezone.now() - timedelta(microseconds=1),
            )
            value["gpus"][0]["serial"] = HOSTILE
        fleet.execution(diag, device=device, status="running", inventory=value)


def test_the_page_shows_the_current_fingerprint_its_history_and_the_repair_check(fleet, person, device):
    device, diag = device
    _history(fleet, device, diag, gpus=8, changes=2)
    response = person(FINGERPRINT_VIEWER).get("/sites/lon-1/devices/a00-n00/")
    assert response.status_code == 200
    page, read = text(response), shown(response)
    # The current inventory: eight GPUs, the HCAs, the host and driver
    section = read[read.index('id="fingerprint"') :]
    assert section.count('<tr class="gpu">') == 8
    assert "Driver 550.54.15, CUDA 12.4" in " ".join(section.split()).replace("<strong>", "").replace("</strong>", "")
    assert "mlx5_0" in section and "1: Active 400 Gb/s" in section
    assert "BIOS 2.1.3, system serial SYS-0001" in section
    # The history says what changed, newest first
    assert "hardware changed</strong>: GPU 3 (00000000:48:00.0) serial 1652020000003 → 1653020000000" in section
    assert "GPU 3 (00000000:48:00.0) serial 1653020000000 → 1653020000001" in section
    assert "first reported" in section
    # The repair's parts against what was read after it: GPU 4 was not swapped
    assert "✓ gpu 3: installed 1653020000001 is reported" in read
    assert "✗ <strong>mismatch</strong> — gpu 4: removed 1652020000004 is still reported" in read
    # Hostile text from the machine is escaped, never markup
    assert HOSTILE not in page
    assert "&lt;script&gt;alert(&quot;gpu&quot;)&lt;/script&gt;" in page


def test_without_the_permission_the_page_shows_no_fingerprint(fleet, person, device):
    device, diag = device
    _history(fleet, device, diag, gpus=8, changes=1)
    page = text(person(VIEWER).get("/sites/lon-1/devices/a00-n00/"))
    assert 'id="fingerprint"' not in page


def test_a_device_without_an_inventory_says_so(person, device):
    page = text(person(FINGERPRINT_VIEWER).get("/sites/lon-1/devices/a00-n00/"))
    assert "No inventory reported yet" in page


def test_the_page_costs_the_same_queries_for_a_small_and_a_large_history(fleet, person, device):
    device, diag = device
    other = fleet.device(device.satellite, "gpu.h200.8x", hostname="a00-n01")
    _history(fleet, device, diag, gpus=8, changes=1)
    _history(fleet, other, diag, gpus=64, changes=12)
    browser = person(FINGERPRINT_VIEWER)
    counts = []
    for hostname in ("a00-n00", "a00-n01"):
        url = f"/sites/lon-1/devices/{hostname}/"
        browser.get(url)  # warm: the session, permissions
        with CaptureQueriesContext(connection) as queries:
            assert browser.get(url).status_code == 200
        counts.append(len(queries))
    assert counts[0] == counts[1], counts
