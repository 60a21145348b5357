"""The transactional outbox: every writer records its event in the transaction (or the statement)
that makes its change, so an event exists exactly when the change is committed; a reconcile page
pays no statement more for its events, whatever its size."""

from __future__ import annotations

import pytest
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext

from fleet.burnin.certificates.signing import signing_key
from fleet.burnin.models import AcceptanceCertificate
from fleet.events.models import Event
from fleet.lifecycle.services import device_transition
from fleet_rules.vocabulary import DeviceState, EventType, Mover
from tests.burnin.certs import evaluate_now, sweep

RC = "gpu.h200.8x"
PASS = {"diag_failed_tests": {"value": 0}}
FAIL = {"diag_failed_tests": {"value": 2}}


class Rollback(Exception):
    """Raised inside a transaction to roll it back."""


def scene(fleet, n: int, slug: str = "lon-1"):
    site = fleet.site(slug)
    satellite = fleet.satellite(site, "sat-a")
    policy = fleet.policy(RC) if not fleet_has_policy(RC) else None
    diag = fleet.requirement(policy, "gpu-diag") if policy else None
    devices = [fleet.device(satellite, RC, hostname=f"{slug}-n{i}") for i in range(n)]
    return satellite, diag, devices


def fleet_has_policy(rc: str) -> bool:
    from fleet.policies.models import AcceptancePolicy

    return AcceptancePolicy.objects.filter(resource_class=rc).exists()


def events(kind: EventType) -> list[Event]:
    return list(Event.objects.filter(type=kind).order_by("subject"))


def test_an_issued_certificate_accepts_its_device_and_both_are_events_of_the_same_page(fleet):
    satellite, diag, devices = scene(fleet, 2)
    evaluate_now(*(fleet.execution(diag, device=d, metrics=PASS) for d in devices))

    sweep(satellite)

    issued = events(EventType.CERTIFICATE_ISSUED)
    accepted = events(EventType.DEVICE_ACCEPTED)
    assert [e.subject for e in issued] == ["sites/lon-1/devices/lon-1-n0", "sites/lon-1/devices/lon-1-n1"]
    assert [e.subject for e in accepted] == [e.subject for e in issued]
    device = devices[0]
    certificate = AcceptanceCertificate.objects.get(device=device)
    assert issued[0].data["certificate"] == str(certificate.serial)
    assert issued[0].site_id == device.site_id
    data = accepted[0].data
    assert (data["device_id"], data["hostname"], data["site"], data["resource_class"]) == (
        str(device.id),
        device.hostname,
        "lon-1",
        RC,
    )
    assert (data["from_state"], data["to_state"], data["cause"]) == ("burn_in", "accepted", "certificate_issued")
    assert data["links"] == {
        "dashboard": f"/sites/lon-1/devices/{device.hostname}/",
        "evidence_pack": f"/api/v1/devices/{device.id}/evidence-pack/",
    }
    assert accepted[0].time == certificate.issued_at


def test_a_superseded_certificate_and_its_lifted_device_are_events(fleet):
    satellite, diag, devices = scene(fleet, 1)
    evaluate_now(fleet.execution(diag, device=devices[0], metrics=PASS))
    sweep(satellite)
    evaluate_now(fleet.execution(diag, device=devices[0], metrics=FAIL))

    sweep(satellite)

    (superseded,) = events(EventType.CERTIFICATE_SUPERSEDED)
    assert superseded.data["reason"] == "failed"
    (lifted,) = events(EventType.DEVICE_BURN_IN)
    assert (lifted.data["from_state"], lifted.data["cause"]) == ("accepted", "certificate_superseded")


@pytest.mark.django_db(transaction=True)
def test_a_change_rolled_back_leaves_no_event(fleet):
    satellite, diag, devices = scene(fleet, 3)
    evaluate_now(*(fleet.execution(diag, device=d, metrics=PASS) for d in devices))

    with pytest.raises(Rollback), transaction.atomic():
        sweep(satellite)
        device_transition(
            device_id=devices[0].id, to=DeviceState.DECOMMISSIONED, mover=Mover.OPERATOR, actor="user:ada", reason="x"
        )
        # seen inside: issued, accepted, the class accepted, decommissioned
        assert Event.objects.count() == 3 + 3 + 1 + 1
        raise Rollback

    assert Event.objects.count() == 0
    assert AcceptanceCertificate.objects.count() == 0

    device_transition(
        device_id=devices[0].id, to=DeviceState.DECOMMISSIONED, mover=Mover.OPERATOR, actor="user:ada", reason="x"
    )
    (event,) = Event.objects.all()
    assert event.type == EventType.DEVICE_DECOMMISSIONED and event.data["actor"] == "user:ada"


def test_a_refused_move_is_no_event(fleet):
    satellite, diag, devices = scene(fleet, 1)
    with pytest.raises(Exception, match="holds no valid acceptance certificate"):
        device_transition(device_id=devices[0].id, to=DeviceState.ACCEPTED, mover=Mover.OPERATOR, actor="user:ada")
    assert not Event.objects.exists()


def _page_queries(satellite) -> int:
    with CaptureQueriesContext(connection) as queries:
        totals = sweep(satellite)
    assert len(totals.pages) == 1
    return len(queries)


def test_a_reconcile_page_records_its_events_in_the_same_statements_at_two_sizes(fleet):
    small = scene(fleet, 3, "small")
    large = scene(fleet, 60, "large")
    for _satellite, _diag, devices in (small, large):
        evaluate_now(*(fleet.execution(small[1], device=d, metrics=PASS) for d in devices))

    signing_key()  # loaded and checked once per process, not per page: not in the first page's count
    issue_small, issue_large = _page_queries(small[0]), _page_queries(large[0])

    assert issue_small == issue_large
    assert Event.objects.filter(type=EventType.CERTIFICATE_ISSUED).count() == 63
    assert Event.objects.filter(type=EventType.DEVICE_ACCEPTED).count() == 63

    for _satellite, _diag, devices in (small, large):
        evaluate_now(*(fleet.execution(small[1], device=d, metrics=FAIL) for d in devices))
    supersede_small, supersede_large = _page_queries(small[0]), _page_queries(large[0])

    assert supersede_small == supersede_large
    assert Event.objects.filter(type=EventType.CERTIFICATE_SUPERSEDED).count() == 63
    assert Event.objects.filter(type=EventType.DEVICE_BURN_IN).count() == 63
