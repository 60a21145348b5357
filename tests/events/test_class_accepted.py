"""`com.fleet-burnin.class.accepted`: written by the reconcile page whose certificate completes a
(site, resource class) — every enrolled device holding a valid certificate — once, and again only
after the class stopped being complete and became so again; in the issue statement itself (no
statement more per page), and once when two pages finish the class together."""

from __future__ import annotations

import threading

import pytest
from django.db import connection, connections
from django.test.utils import CaptureQueriesContext

from fleet.burnin.certificates import issuance
from fleet.burnin.certificates.signing import signing_key
from fleet.events.models import Event
from fleet_rules.vocabulary import EventType
from tests.burnin.certs import evaluate_now, sweep
from tests.support.locks import wait_for_lock_wait

RC = "gpu.h200.8x"
PASS = {"diag_failed_tests": {"value": 0}}
FAIL = {"diag_failed_tests": {"value": 2}}


def class_events() -> list[Event]:
    return list(Event.objects.filter(type=EventType.CLASS_ACCEPTED).order_by("time", "subject"))


def test_the_page_that_certifies_a_classs_last_device_writes_the_event_once(fleet):
    # Given a class of three devices at lon-1, two of them passed and certified
    site = fleet.site("lon-1")
    satellite = fleet.satellite(site, "sat-a")
    diag = fleet.requirement(fleet.policy(RC), "gpu-diag")
    devices = [fleet.device(satellite, RC, hostname=f"n{i}") for i in range(3)]
    other = fleet.device(satellite, "cpu.genoa", hostname="c0")  # another class: not counted
    evaluate_now(*(fleet.execution(diag, device=d, metrics=PASS) for d in devices[:2]))
    sweep(satellite)
    assert class_events() == []

    # When the third passes and a sweep certifies it
    evaluate_now(fleet.execution(diag, device=devices[2], metrics=PASS))
    sweep(satellite)

    # Then the class is accepted: one event, naming the site, the class and its devices
    (event,) = class_events()
    assert event.subject == f"sites/lon-1/classes/{RC}"
    assert event.site_id == site.id
    assert event.data == {
        "site": "lon-1",
        "resource_class": RC,
        "devices": 3,
        "certificates": 1,
        "links": {"dashboard": "/sites/lon-1/"},
    }
    assert other.resource_class != RC

    # and a sweep that changes nothing writes none
    sweep(satellite)
    assert len(class_events()) == 1


def test_a_class_that_stops_being_accepted_and_becomes_so_again_is_a_second_event(fleet):
    site = fleet.site("lon-1")
    satellite = fleet.satellite(site, "sat-a")
    diag = fleet.requirement(fleet.policy(RC), "gpu-diag")
    devices = [fleet.device(satellite, RC, hostname=f"n{i}") for i in range(2)]
    evaluate_now(*(fleet.execution(diag, device=d, metrics=PASS) for d in devices))
    sweep(satellite)
    assert len(class_events()) == 1

    # a device fails: its certificate is superseded, the class is no longer accepted
    evaluate_now(fleet.execution(diag, device=devices[0], metrics=FAIL))
    sweep(satellite)
    assert len(class_events()) == 1

    # it passes again: the class is accepted again
    evaluate_now(fleet.execution(diag, device=devices[0], metrics=PASS))
    sweep(satellite)
    assert len(class_events()) == 2

    # a newly enrolled device makes the class incomplete until it is certified too
    fresh = fleet.device(satellite, RC, hostname="n9")
    evaluate_now(fleet.execution(diag, device=devices[1], metrics=PASS))  # renewed: the class stays accepted
    sweep(satellite)
    assert len(class_events()) == 2
    evaluate_now(fleet.execution(diag, device=fresh, metrics=PASS))
    sweep(satellite)
    events = class_events()
    assert len(events) == 3 and events[-1].data["devices"] == 3


def test_a_renewal_of_an_accepted_classs_device_is_no_event(fleet):
    site = fleet.site("lon-1")
    satellite = fleet.satellite(site, "sat-a")
    diag = fleet.requirement(fleet.policy(RC), "gpu-diag")
    (device,) = [fleet.device(satellite, RC, hostname="n0")]
    evaluate_now(fleet.execution(diag, device=device, metrics=PASS))
    sweep(satellite)
    evaluate_now(fleet.execution(diag, device=device, metrics=PASS))  # a newer pass: renewed in one page

    sweep(satellite)

    from fleet.burnin.models import AcceptanceCertificate

    assert AcceptanceCertificate.objects.filter(device=device).count() == 2
    assert len(class_events()) == 1


def _page_queries(satellite) -> int:
    with CaptureQueriesContext(connection) as queries:
        totals = sweep(satellite)
    assert len(totals.pages) == 1
    return len(queries)


#: What these pages sent before the class event existed (measured on the commit before it, this
#: test without its event assertions): a page that issues, completing its class or not.
ISSUING_PAGE = 15


def test_the_event_costs_a_page_no_statement_at_two_sizes(fleet):
    diag = fleet.requirement(fleet.policy(RC), "gpu-diag")
    scenes = {}
    for slug, n in (("small", 3), ("large", 60)):
        satellite = fleet.satellite(fleet.site(slug), "sat-a")
        scenes[slug] = (satellite, [fleet.device(satellite, RC, hostname=f"{slug}-n{i}") for i in range(n)])
    signing_key()  # read once per process, not per page

    counts = {}
    for slug, (satellite, devices) in scenes.items():
        # a page certifying all but one device (no class event), then one certifying the last
        evaluate_now(*(fleet.execution(diag, device=d, metrics=PASS) for d in devices[:-1]))
        counts[slug, "issue"] = _page_queries(satellite)
        evaluate_now(fleet.execution(diag, device=devices[-1], metrics=PASS))
        counts[slug, "complete"] = _page_queries(satellite)

    assert set(counts.values()) == {ISSUING_PAGE}, counts
    assert sorted(e.subject for e in class_events()) == [f"sites/large/classes/{RC}", f"sites/small/classes/{RC}"]
    assert [e.data["devices"] for e in class_events() if e.subject.startswith("sites/large")] == [60]


@pytest.mark.django_db(transaction=True)
def test_two_pages_finishing_a_class_together_write_the_event_once(fleet, monkeypatch):
    """Two satellites' sweeps each certify one of the class's last two devices. The first holds its
    page open after its issue statement; the second waits for it (the class's acceptance lock)
    before its own, then sees the first's certificate: one of them — exactly one — completes the
    class. Without the lock neither sees the other's certificate and no event is written."""
    site = fleet.site("lon-1")
    sat_a, sat_b = fleet.satellite(site, "sat-a"), fleet.satellite(site, "sat-b")
    diag = fleet.requirement(fleet.policy(RC), "gpu-diag")
    a0, b0 = fleet.device(sat_a, RC, hostname="a0"), fleet.device(sat_b, RC, hostname="b0")
    evaluate_now(fleet.execution(diag, device=a0, metrics=PASS), fleet.execution(diag, device=b0, metrics=PASS))
    signing_key()

    original = issuance.transitions_outcome
    issued, resume = threading.Event(), threading.Event()

    def held_open(*args, **kwargs):
        if threading.current_thread().name == "a":
            issued.set()
            assert resume.wait(30)
        return original(*args, **kwargs)

    monkeypatch.setattr(issuance, "transitions_outcome", held_open)
    errors: list[BaseException] = []

    def run(satellite):
        try:
            sweep(satellite)
        except BaseException as exc:  # surfaced below
            errors.append(exc)
        finally:
            connections.close_all()

    a = threading.Thread(target=run, name="a", args=(sat_a,))
    a.start()
    assert issued.wait(30)  # a's certificate is inserted, not committed
    b = threading.Thread(target=run, name="b", args=(sat_b,))
    b.start()
    try:
        wait_for_lock_wait("the second page, for the class's acceptance lock,")
    finally:
        resume.set()
    a.join(30)
    b.join(30)
    assert not errors and not a.is_alive() and not b.is_alive()
    (event,) = class_events()
    assert event.data["devices"] == 2 and event.data["certificates"] == 1
