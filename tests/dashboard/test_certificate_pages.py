"""The dashboard's certificates: the device page shows the certificate and its history with a
printable view; the site page counts certified devices and shows time to accept."""

from __future__ import annotations

from fleet.burnin.models import AcceptanceCertificate
from tests.dashboard.conftest import VIEWER


def text(response) -> str:
    assert response.status_code == 200, response.status_code
    return response.content.decode()


def test_the_device_page_shows_the_valid_certificate_and_links_a_printable_view(person, burnt_in):
    viewer = person(VIEWER)
    certificate = AcceptanceCertificate.objects.get(device__hostname="a00-n01")
    page = text(viewer.get("/sites/lon-1/devices/a00-n01/"))
    assert "<strong>valid</strong> certificate" in page and str(certificate.serial) in page
    assert 'id="print-certificate"' in page

    printable = text(viewer.get("/sites/lon-1/devices/a00-n01/certificate/"))
    assert "✓ Valid" in printable and certificate.signature in printable and certificate.sha256 in printable
    assert "hbm_bandwidth_tbps.min gte 3.6" in printable and "rack-nccl" in printable
    assert "<nav>" not in printable  # a page to print: no dashboard chrome

    failing = text(viewer.get("/sites/lon-1/devices/a00-n00/"))
    assert "No valid certificate" in failing
    assert viewer.get("/sites/lon-1/devices/a00-n00/certificate/").status_code == 404


def test_the_site_page_counts_certified_devices_and_shows_time_to_accept_and_who_waits(person, burnt_in):
    page = text(person(VIEWER).get("/sites/lon-1/"))
    # rack a00: n01-n03 pass everything (n00 fails hbm); rack a01's collective errored.
    assert '<strong class="certified">3 of 8</strong>' in page
    assert "time to accept p50" in page
    assert "waiting longest for a certificate" in page
    assert "hbm-bandwidth" in page.split("waiting longest")[1]
    assert "rack-nccl" in page.split("waiting longest")[1]


def test_without_the_certificate_permission_the_sections_are_not_shown(person, burnt_in):
    viewer = person([p for p in VIEWER if p != "burnin.view_acceptancecertificate"], username="plain")
    assert "Acceptance certificate" not in text(viewer.get("/sites/lon-1/devices/a00-n01/"))
    assert "time to accept" not in text(viewer.get("/sites/lon-1/"))
    assert viewer.get("/sites/lon-1/devices/a00-n01/certificate/").status_code == 403
