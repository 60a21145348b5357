"""The lifecycle service on PostgreSQL: the evidence moves devices inside the reconcile page that
issues or supersedes their certificate (and nothing else does); people move them through the table."""

from __future__ import annotations

import uuid

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from fleet.burnin.models import AcceptanceCertificate
from fleet.core.exceptions import Conflict
from fleet.inventory.models import Device
from fleet.lifecycle.models import DeviceStateChange
from fleet.lifecycle.services import AutomaticMove, Move, automatic_moves_apply, device_transition, transitions_apply
from fleet_rules.vocabulary import DeviceState, Mover, TransitionCause
from tests.burnin.certs import evaluate_now, sweep

RC = "gpu.h200.8x"
PASS = {"diag_failed_tests": {"value": 0}}
FAIL = {"diag_failed_tests": {"value": 2}}


class Site:
    def __init__(self, fleet):
        self.fleet = fleet
        self.satellite = fleet.satellite(fleet.site("lon-1"), "sat-a")
        self.policy = fleet.policy(RC)
        self.diag = fleet.requirement(self.policy, "gpu-diag")
        self.devices = [fleet.device(self.satellite, RC, hostname=f"n{i}") for i in range(3)]

    def report(self, device, metrics):
        evaluate_now(self.fleet.execution(self.diag, device=device, metrics=metrics))


@pytest.fixture
def site(fleet):
    return Site(fleet)


def state(device) -> str:
    return Device.objects.get(id=device.id).state


def test_a_device_is_accepted_when_its_certificate_is_issued_in_the_same_page(site):
    site.report(site.devices[0], PASS)
    assert state(site.devices[0]) == DeviceState.BURN_IN  # evidence alone moves nothing
    sweep(site.satellite)
    certificate = AcceptanceCertificate.objects.get(device=site.devices[0])
    assert state(site.devices[0]) == DeviceState.ACCEPTED
    assert [state(d) for d in site.devices[1:]] == [DeviceState.BURN_IN, DeviceState.BURN_IN]
    (change,) = DeviceStateChange.objects.filter(device=site.devices[0])
    assert (change.from_state, change.to_state, change.cause, change.actor) == (
        DeviceState.BURN_IN,
        DeviceState.ACCEPTED,
        TransitionCause.CERTIFICATE_ISSUED,
        "system",
    )
    assert change.refs == {"certificate": str(certificate.serial)} and change.at == certificate.issued_at


def test_auto_accept_off_leaves_acceptance_to_people(site):
    site.policy.auto_accept = False
    site.policy.save()
    site.report(site.devices[0], PASS)
    sweep(site.satellite)
    assert AcceptanceCertificate.objects.filter(device=site.devices[0]).exists()
    assert state(site.devices[0]) == DeviceState.BURN_IN
    assert not DeviceStateChange.objects.exists()


def test_a_superseded_certificate_sends_an_accepted_device_back_to_burn_in_but_not_one_in_service(site):
    for device in site.devices[:2]:
        site.report(device, PASS)
    sweep(site.satellite)
    device_transition(
        device_id=site.devices[1].id, to=DeviceState.IN_SERVICE, mover=Mover.OPERATOR, actor="user:ops", certified=True
    )
    for device in site.devices[:2]:
        site.report(device, FAIL)
    sweep(site.satellite)
    assert state(site.devices[0]) == DeviceState.BURN_IN
    assert state(site.devices[1]) == DeviceState.IN_SERVICE  # flagged, never pulled out automatically
    newest = DeviceStateChange.objects.filter(device=site.devices[0]).first()
    assert newest is not None and newest.cause == TransitionCause.CERTIFICATE_SUPERSEDED
    assert newest.refs["supersede_reason"] == "failed"


def test_a_person_moves_a_device_through_the_table_and_a_refused_move_names_the_rule(site):
    device = site.devices[0]
    with pytest.raises(Conflict, match="cannot move from burn_in to in_service"):
        device_transition(device_id=device.id, to=DeviceState.IN_SERVICE, mover=Mover.OPERATOR, actor="user:ops")
    with pytest.raises(Conflict, match="no valid acceptance certificate"):
        device_transition(device_id=device.id, to=DeviceState.ACCEPTED, mover=Mover.OPERATOR, actor="user:ops")
    device_transition(device_id=device.id, to=DeviceState.NEEDS_REPAIR, mover=Mover.OPERATOR, actor="user:ops")
    with pytest.raises(Conflict, match="only when a repair is recorded"):
        device_transition(device_id=device.id, to=DeviceState.BURN_IN, mover=Mover.OPERATOR, actor="user:ops")
    assert state(device) == DeviceState.NEEDS_REPAIR
    assert [(c.from_state, c.to_state) for c in DeviceStateChange.objects.filter(device=device)] == [
        (DeviceState.BURN_IN, DeviceState.NEEDS_REPAIR)
    ]


def test_a_forced_acceptance_needs_a_reason_and_is_marked(site):
    device = site.devices[0]
    with pytest.raises(Exception, match="needs a reason"):
        device_transition(device_id=device.id, to=DeviceState.ACCEPTED, mover=Mover.OPERATOR, actor="u", force=True)
    changed = device_transition(
        device_id=device.id, to=DeviceState.ACCEPTED, mover=Mover.OPERATOR, actor="u", force=True, reason="RMA swap"
    )
    assert changed.change is not None and changed.change.refs == {"forced": True}


@pytest.mark.parametrize("n", [1, 40])
def test_automatic_moves_are_one_statement_whatever_their_number(fleet, n):
    satellite = fleet.satellite(fleet.site("lon-1"), "sat-a")
    fleet.policy(RC)
    devices = [fleet.device(satellite, RC, hostname=f"m{i}") for i in range(n)]
    moves = [AutomaticMove(d.id, DeviceState.ACCEPTED, TransitionCause.CERTIFICATE_ISSUED) for d in devices]
    with CaptureQueriesContext(connection) as captured:
        made = automatic_moves_apply(moves)
    assert len(captured) == 1 and len(made) == n
    assert Device.objects.filter(state=DeviceState.ACCEPTED).count() == n
    assert DeviceStateChange.objects.filter(cause=TransitionCause.CERTIFICATE_ISSUED).count() == n
    # compare-and-set: a second application finds them accepted and moves nothing, writes no history
    assert automatic_moves_apply(moves) == []
    assert DeviceStateChange.objects.count() == n


# --- the one writer: any mix of moves, one statement ----------------------------------------------


@pytest.mark.parametrize("n", [1, 30])
def test_the_writer_makes_a_mix_of_moves_in_one_statement_and_says_why_it_refused_the_rest(fleet, n):
    """People's and the service's moves together: those the table allows from where each device is
    (and, with `expected`, only from the state the caller read) are made with their history; the
    rest stay where they are, each refusal naming its device and its rule."""
    satellite = fleet.satellite(fleet.site("lon-1"), "sat-a")
    fleet.policy(RC)
    devices = [fleet.device(satellite, RC, hostname=f"w{i:02d}") for i in range(n + 3)]
    movable, table, stale, repair = devices[:n], devices[n], devices[n + 1], devices[n + 2]
    Device.objects.filter(id=repair.id).update(state=DeviceState.NEEDS_REPAIR)
    unknown = uuid.uuid4()
    moves = [
        *(
            Move(d.id, DeviceState.NEEDS_REPAIR, Mover.OPERATOR, TransitionCause.OPERATOR, "user:ops", "RMA")
            for d in movable
        ),
        Move(table.id, DeviceState.IN_SERVICE, Mover.FLEET_FILE, TransitionCause.FLEET_FILE, "fleet-apply"),
        Move(
            stale.id, DeviceState.DECOMMISSIONED, Mover.OPERATOR, TransitionCause.OPERATOR, expected=DeviceState.STAGED
        ),
        Move(repair.id, DeviceState.BURN_IN, Mover.OPERATOR, TransitionCause.OPERATOR),
        AutomaticMove(unknown, DeviceState.NEEDS_REPAIR, TransitionCause.ISOLATION).requested(),
    ]
    with CaptureQueriesContext(connection) as captured:
        applied = transitions_apply(moves)
    assert len(captured) == 1
    assert sorted(m.device_id for m in applied.moved) == sorted(d.id for d in movable)
    assert all(state(d) == DeviceState.NEEDS_REPAIR for d in movable)
    changes = DeviceStateChange.objects.filter(device__in=movable)
    assert {(c.from_state, c.to_state, c.actor, c.reason) for c in changes} == {
        (DeviceState.BURN_IN, DeviceState.NEEDS_REPAIR, "user:ops", "RMA")
    }
    assert {c.id for c in changes} == set(applied.changes.values())
    why = {r.device_id: r.why for r in applied.refused}
    assert why[table.id].startswith(f"{table.hostname}: A device cannot move from burn_in to in_service")
    assert why[stale.id].startswith(f"{stale.hostname} is burn_in now, not staged")
    assert "only when a repair is recorded" in why[repair.id]
    assert why[unknown] == f"No device {unknown}."
    assert [state(d) for d in (table, stale, repair)] == ["burn_in", "burn_in", "needs_repair"]
    assert not DeviceStateChange.objects.filter(device__in=[table, stale, repair]).exists()
