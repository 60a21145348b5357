"""The dashboard's certificates: the device page shows the certificate and its history with a
printable view; the site page counts certified devices and shows time to accept."""

from __future__ import annotations

from fleet.burnin.models import AcceptanceCertificate
from fleet_rules.gpu_vendors import gpus_in_words
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
    assert "hbm_bandwidth_tbps.min ≥ 3.6 TB/s" in printable and "rack-nccl" in printable
    assert "<nav>" not in printable  # a page to print: no dashboard chrome
    bound = (certificate.document.get("fingerprint") or {}).get("inventory")
    gpus = gpus_in_words(bound) or "— no fingerprint bound"
    assert f'<td class="gpus">{gpus}</td>' in printable  # whose GPUs it binds

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


def test_a_superseded_or_expired_certificate_is_not_counted_and_its_device_waits(person, burnt_in):
    from datetime import timedelta

    from django.utils import timezone

    from fleet_rules.vocabulary import SupersedeReason

    now = timezone.now()
    superseded = AcceptanceCertificate.objects.get(device__hostname="a00-n01")
    superseded.superseded_at, superseded.supersede_reason = now, SupersedeReason.FAILED
    superseded.save(update_fields=["superseded_at", "supersede_reason"])
    AcceptanceCertificate.objects.filter(device__hostname="a00-n02").update(valid_until=now - timedelta(seconds=1))
    page = text(person(VIEWER).get("/sites/lon-1/"))
    assert '<strong class="certified">1 of 8</strong>' in page
    waiting = page.split("waiting longest")[1]
    assert "a00-n01" in waiting and "a00-n02" in waiting and "a00-n03" not in waiting


def test_without_the_certificate_permission_the_sections_are_not_shown(person, burnt_in):
    viewer = person([p for p in VIEWER if p != "burnin.view_acceptancecertificate"], username="plain")
    assert "Acceptance certificate" not in text(viewer.get("/sites/lon-1/devices/a00-n01/"))
    assert "time to accept" not in text(viewer.get("/sites/lon-1/"))
    assert viewer.get("/sites/lon-1/devices/a00-n01/certificate/").status_code == 403


CANDIDATE = b"""
policies:
  - resource_class: gpu.h200.8x
    requirements:
      - name: hbm-bandwidth
        gate: burn-in
        test: nvbandwidth
        thresholds: [{metric: hbm_bandwidth_tbps, statistic: min, comparator: gte, threshold: 4.02}]
"""


def test_an_operator_uploads_a_candidate_and_sees_what_would_flip(person, burnt_in):
    from django.core.files.uploadedfile import SimpleUploadedFile

    from fleet.policies.models import AcceptancePolicy

    operator = person([*VIEWER, "jobs.add_job"], username="op")
    assert 'id="what-if-run"' in text(operator.get("/what-if/"))
    operator.get("/what-if/")
    csrf = operator.cookies["csrftoken"].value
    response = operator.post(
        "/what-if/",
        {"candidate": SimpleUploadedFile("candidate.yaml", CANDIDATE), "csrfmiddlewaretoken": csrf},
    )
    page = text(response)
    # hbm min is 4.01 on every rack's n01: both flip; only rack a00's n01 holds a certificate.
    assert "2 targets would flip; 1 certificate would be superseded" in page
    assert "lon-1 · gpu.h200.8x · hbm-bandwidth" in page
    assert "a00-n01" in page and "a01-n01" in page
    assert "hbm_bandwidth_tbps.min 4.01 TB/s is below ≥ 4.02 TB/s (−0.2 %)" in page  # the failures list's words
    assert AcceptancePolicy.objects.get().version == 1  # nothing written

    bad = operator.post(
        "/what-if/", {"candidate": SimpleUploadedFile("c.yaml", b"policies: [{}]"), "csrfmiddlewaretoken": csrf}
    )
    assert bad.status_code == 400 and "policies[0].resource_class" in bad.content.decode()


def test_a_viewer_may_not_run_a_what_if(person, burnt_in):
    assert person(VIEWER).get("/what-if/").status_code == 403
