"""Acceptance certificates: issued within the sweep that writes a device's last pass, signed,
chained, superseded with a reason, in a constant number of queries per page."""

from __future__ import annotations

import base64
import json

import pytest
import rfc8785
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
from django.db import connection
from django.test.utils import CaptureQueriesContext

from fleet.burnin.models import AcceptanceCertificate, CertificateKey
from tests.burnin.certs import current, evaluate_now, sweep
from tests.support.locks import wait_for_lock_wait

RC = "gpu.h200.8x"
GOOD = {"diag_failed_tests": {"value": 0}}
BAD = {"diag_failed_tests": {"value": 3}}


def independent_verify(envelope: dict, public_key_b64: str) -> bool:
    """A verifier that shares no code with the service: plain cryptography and RFC 8785."""
    data = rfc8785.dumps(envelope["certificate"])
    try:
        Ed25519PublicKey.from_public_bytes(base64.b64decode(public_key_b64)).verify(
            base64.b64decode(envelope["signature"]), data
        )
    except (InvalidSignature, ValueError):
        return False
    return True


@pytest.fixture
def rack_scene(fleet):
    """Two devices in one rack; a single-node diag and a rack-level collective, the rack managed
    by another satellite than the devices (so the last pass may come from either scope)."""
    site = fleet.site("lon-1")
    nodes = fleet.satellite(site, "sat-a")
    racks = fleet.satellite(site, "sat-b")
    rack = fleet.topology(racks, "rack", "r01")
    devices = [fleet.device(nodes, RC, hostname=f"a01-n{i}", topologies=[rack]) for i in range(2)]
    policy = fleet.policy(RC)
    diag = fleet.requirement(policy, "gpu-diag")
    nccl = fleet.requirement(
        policy,
        "rack-nccl",
        scope="multi_node",
        test="nccl-all-reduce",
        thresholds=[{"metric": "busbw", "comparator": "gte", "threshold": 400}],
    )
    return site, nodes, racks, rack, devices, policy, diag, nccl


def test_a_certificate_is_issued_in_the_sweep_that_writes_the_last_pass(fleet, rack_scene):
    site, nodes, racks, rack, devices, policy, diag, nccl = rack_scene
    evaluate_now(*(fleet.execution(diag, device=d, metrics=GOOD) for d in devices))
    sweep(nodes)
    assert AcceptanceCertificate.objects.count() == 0  # the rack's collective has not run

    collective = fleet.execution(nccl, topology=rack, metrics={"busbw": {"value": 431.0}})
    evaluate_now(collective)
    sweep(racks)

    for device in devices:
        certificate = current(device)
        assert certificate is not None
        document = certificate.document
        assert document["device"]["hostname"] == device.hostname
        assert document["policy"] == {"resource_class": RC, "version": policy.version}
        by_name = {r["name"]: r for r in document["requirements"]}
        assert set(by_name) == {"gpu-diag", "rack-nccl"}
        assert by_name["rack-nccl"]["execution"]["id"] == str(collective.id)
        assert by_name["rack-nccl"]["target"] == {"kind": "topology", "id": str(rack.id), "label": "r01"}
        assert by_name["rack-nccl"]["thresholds"] == [
            {"comparator": "gte", "metric": "busbw", "statistic": None, "threshold": 400}
        ]
        assert by_name["rack-nccl"]["execution"]["metrics"] == {"busbw": {"value": 431.0}}
        assert document["previous_certificate_sha256"] is None
        assert certificate.canonical.encode() == rfc8785.dumps(document)
        key = CertificateKey.objects.get(key_id=certificate.key_id)
        envelope = {"certificate": document, "signature": certificate.signature}
        assert independent_verify(envelope, base64.b64encode(bytes(key.public_key)).decode())

    # A sweep that finds nothing new issues nothing new.
    sweep(nodes)
    sweep(racks)
    assert AcceptanceCertificate.objects.count() == 2


def test_a_newer_failing_result_supersedes_with_its_reason_and_the_history_chains(fleet, rack_scene):
    site, nodes, racks, rack, devices, policy, diag, nccl = rack_scene
    evaluate_now(*(fleet.execution(diag, device=d, metrics=GOOD) for d in devices))
    evaluate_now(fleet.execution(nccl, topology=rack, metrics={"busbw": {"value": 431.0}}))
    sweep(nodes)
    sweep(racks)
    first = current(devices[0])
    untouched = current(devices[1])

    evaluate_now(fleet.execution(diag, device=devices[0], metrics=BAD))
    sweep(nodes)
    first.refresh_from_db()
    assert first.superseded_at is not None and first.supersede_reason == "failed"
    assert current(devices[0]) is None
    assert current(devices[1]) == untouched

    evaluate_now(fleet.execution(diag, device=devices[0], metrics=GOOD))
    sweep(nodes)
    second = current(devices[0])
    assert second is not None and second.previous_id == first.serial
    assert second.document["previous_certificate_sha256"] == first.sha256

    errored = fleet.execution(diag, device=devices[0], status="errored", error="runner crashed")
    evaluate_now(errored)
    sweep(nodes)
    second.refresh_from_db()
    assert second.supersede_reason == "errored"
    assert list(AcceptanceCertificate.objects.filter(device=devices[0]).order_by("issued_at")) == [first, second]


def _fleet_of(fleet, n: int, site_slug: str):
    site = fleet.site(site_slug)
    satellite = fleet.satellite(site, "sat-a")
    policy = fleet.policy(f"gpu.{site_slug}")
    diag = fleet.requirement(policy, "gpu-diag")
    devices = [fleet.device(satellite, policy.resource_class) for _ in range(n)]
    evaluate_now(*(fleet.execution(diag, device=d, metrics=GOOD) for d in devices))
    return satellite, policy, diag, devices


def _page_queries(satellite, resource_class: str) -> int:
    with CaptureQueriesContext(connection) as queries:
        totals = sweep(satellite, resource_class)
    assert len(totals.pages) == 1
    return len(queries)


def test_issuance_and_supersession_take_the_same_queries_at_two_fleet_sizes(fleet):
    small = _fleet_of(fleet, 3, "small")
    large = _fleet_of(fleet, 60, "large")
    issue_small, issue_large = (
        _page_queries(small[0], small[1].resource_class),
        _page_queries(large[0], large[1].resource_class),
    )
    assert AcceptanceCertificate.objects.filter(superseded_at__isnull=True).count() == 63
    assert issue_small == issue_large

    for _satellite, _policy, diag, devices in (small, large):
        evaluate_now(*(fleet.execution(diag, device=d, metrics=BAD) for d in devices))
    supersede_small, supersede_large = (
        _page_queries(small[0], small[1].resource_class),
        _page_queries(large[0], large[1].resource_class),
    )
    assert AcceptanceCertificate.objects.filter(supersede_reason="failed").count() == 63
    assert supersede_small == supersede_large


def test_the_canonical_bytes_are_the_documents_rfc8785_form(fleet, rack_scene):
    site, nodes, racks, rack, devices, policy, diag, nccl = rack_scene
    evaluate_now(*(fleet.execution(diag, device=d, metrics=GOOD) for d in devices))
    evaluate_now(fleet.execution(nccl, topology=rack, metrics={"busbw": {"value": 431.0}}))
    sweep(nodes)
    sweep(racks)
    certificate = current(devices[0])
    assert json.loads(certificate.canonical) == certificate.document
    assert certificate.canonical == rfc8785.dumps(json.loads(certificate.canonical)).decode()


def test_a_first_certificate_observes_time_to_accept_once_per_device(fleet, django_capture_on_commit_callbacks):
    from prometheus_client import REGISTRY

    def observed() -> float:
        labels = {"site": "tta-1", "resource_class": RC}
        return REGISTRY.get_sample_value("fleet_time_to_accept_seconds_count", labels) or 0.0

    site = fleet.site("tta-1")
    satellite = fleet.satellite(site, "sat-a")
    diag = fleet.requirement(fleet.policy(RC), "gpu-diag")
    devices = [fleet.device(satellite, RC) for _ in range(2)]
    before = observed()
    with django_capture_on_commit_callbacks(execute=True):
        evaluate_now(*(fleet.execution(diag, device=d, metrics=GOOD) for d in devices))
        sweep(satellite)
    assert observed() - before == 2
    with django_capture_on_commit_callbacks(execute=True):
        evaluate_now(fleet.execution(diag, device=devices[0], metrics=GOOD))  # renewed: not a first
        sweep(satellite)
    assert AcceptanceCertificate.objects.filter(device=devices[0]).count() == 2  # renewed
    assert observed() - before == 2


@pytest.mark.django_db(transaction=True)
def test_two_scopes_touching_one_device_concurrently_decide_its_certificate_one_after_the_other(fleet, monkeypatch):
    """The rack's sweep (sat-b) is about to issue a certificate while the nodes' sweep (sat-a)
    writes a newer failure of the device: the second waits for the first and supersedes."""
    import threading

    from django.db import connections

    from fleet.burnin.certificates import issuance

    site = fleet.site("lon-1")
    nodes, racks = fleet.satellite(site, "sat-a"), fleet.satellite(site, "sat-b")
    rack = fleet.topology(racks, "rack", "r01")
    device = fleet.device(nodes, RC, hostname="n0", topologies=[rack])
    policy = fleet.policy(RC)
    diag = fleet.requirement(policy, "gpu-diag")
    nccl = fleet.requirement(
        policy, "rack-nccl", scope="multi_node", thresholds=[{"metric": "busbw", "comparator": "gte", "threshold": 1}]
    )
    evaluate_now(fleet.execution(diag, device=device, metrics=GOOD))
    sweep(nodes)
    evaluate_now(fleet.execution(nccl, topology=rack, metrics={"busbw": {"value": 2}}))
    evaluate_now(fleet.execution(diag, device=device, metrics=BAD))  # a newer failure, not yet swept

    original = issuance._issue_columns
    deciding, resume = threading.Event(), threading.Event()

    def slow_issue(issue, now):
        if threading.current_thread().name == "racks" and issue:
            deciding.set()
            assert resume.wait(30)
        return original(issue, now)

    monkeypatch.setattr(issuance, "_issue_columns", slow_issue)
    errors = []

    def run(satellite):
        try:
            sweep(satellite)
        except Exception as exc:  # surfaced below
            errors.append(exc)
        finally:
            connections.close_all()

    a = threading.Thread(target=run, name="racks", args=(racks,))
    a.start()
    assert deciding.wait(30)  # the rack sweep decided to issue (it saw the old pass) and holds the device
    b = threading.Thread(target=run, name="nodes", args=(nodes,))
    b.start()
    try:
        wait_for_lock_wait("the nodes' sweep, for the device lock,")
    finally:
        resume.set()
    a.join(30)
    b.join(30)
    assert not errors and not a.is_alive() and not b.is_alive()
    [certificate] = AcceptanceCertificate.objects.filter(device=device)
    assert certificate.supersede_reason == "failed"
