"""Concurrent reconcile pages and repairs on the same devices keep one consistent state and history:
every history entry starts where the previous one ended, the last ends where the device is, and no
entry is lost."""

from __future__ import annotations

import io
import threading

import pytest
from django.core.management import CommandError, call_command
from django.db import connections, transaction

from fleet.core.locks import lock_in_pk_order
from fleet.inventory.models import Device
from fleet.lifecycle.models import DeviceStateChange, Repair
from fleet.repairs.services import repair_record
from fleet_rules.vocabulary import DeviceState, RepairRerun, TransitionCause, WorkflowName
from tests.burnin.certs import evaluate_now, sweep
from tests.support.locks import wait_for_lock_wait

RC = "gpu.h200.8x"
FAIL = {"diag_failed_tests": {"value": 2}}


@pytest.mark.django_db(transaction=True)
def test_sweeps_racing_repairs_leave_one_state_and_an_unbroken_history(fleet):
    satellite = fleet.satellite(fleet.site("lon-1"), "sat-a", workflows=list(WorkflowName.values))
    policy = fleet.policy(RC)
    policy.breaker_share = 1.0
    policy.save()
    diag = fleet.requirement(policy, "gpu-diag")
    fleet.profile(RC, "dcgm-diag", {"level": 3})
    devices = [fleet.device(satellite, RC, hostname=f"n{i:02d}") for i in range(6)]
    # a device of the class at the site passed gpu-diag (another satellite's: its sweep is not in the
    # race): the requirement is no suspect (fleet_rules.lifecycle.breaker_decide), the share (100 %)
    # alone guards
    other = fleet.satellite(satellite.site, "sat-b", workflows=list(WorkflowName.values))
    passing = fleet.device(other, RC, hostname="ok")
    evaluate_now(fleet.execution(diag, device=passing, metrics={"diag_failed_tests": {"value": 0}}))
    sweep(other)
    for _ in range(3):
        for device in devices:
            evaluate_now(fleet.execution(diag, device=device, metrics=FAIL))
        sweep(satellite)
    states = Device.objects.filter(id__in=[d.id for d in devices]).values_list("state", flat=True)
    assert set(states) == {DeviceState.NEEDS_REPAIR}
    for device in devices:  # a fourth failure, reported but not yet reconciled, races the repair
        evaluate_now(fleet.execution(diag, device=device, metrics=FAIL))

    errors: list[BaseException] = []
    start = threading.Barrier(len(devices) + 2)

    def run(work):
        try:
            start.wait(10)
            work()
        except BaseException as exc:
            errors.append(exc)
        finally:
            connections.close_all()

    def repair(device):
        return lambda: repair_record(
            device_id=device.id, summary="reseated", parts=[], rerun=RepairRerun.ALL, actor="user:ops"
        )

    work = [repair(d) for d in devices] + [lambda: sweep(satellite), lambda: sweep(satellite)]
    threads = [threading.Thread(target=run, args=(w,)) for w in work]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert not errors, errors

    assert Repair.objects.count() == len(devices)
    for device in Device.objects.filter(id__in=[d.id for d in devices]):
        history = list(DeviceStateChange.objects.filter(device=device, held=False).order_by("at", "id"))
        assert history[0].from_state == DeviceState.BURN_IN
        for before, after in zip(history, history[1:], strict=False):
            assert after.from_state == before.to_state, [(h.from_state, h.to_state, h.cause) for h in history]
        assert history[-1].to_state == device.state
        assert [h.cause for h in history].count(TransitionCause.REPAIR) == 1
        # the failure reported before the repair does not count after it
        assert device.state == DeviceState.BURN_IN


@pytest.mark.django_db(transaction=True)
def test_a_repair_takes_its_rack_s_locks_in_key_order_so_a_dispatch_holding_a_rack_mate_waits_not_deadlocks(fleet):
    """The demo's deadlock (CI, 2026-12-03): the repair locked its device, then the rack mates its
    re-burn-in involves; a dispatch holding a rack mate of lower key, then wanting the repaired
    device, closed the circle. Every writer of devices locks in primary-key order, the repair too."""
    satellite = fleet.satellite(fleet.site("lon-1"), "sat-a", workflows=list(WorkflowName.values))
    rack = fleet.topology(satellite, "rack", "rack-a01")
    fleet.requirement(fleet.policy(RC), "gpu-diag")
    fleet.profile(RC, "dcgm-diag", {"level": 3})
    lower, higher = sorted(
        (fleet.device(satellite, RC, hostname=f"a01-n{i}", topologies=[rack]) for i in range(2)), key=lambda d: d.id
    )
    Device.objects.filter(id=higher.id).update(state=DeviceState.NEEDS_REPAIR)
    holding, errors = threading.Event(), []

    def other_writer():  # as a dispatch of the rack does: the lower key first, then the higher
        try:
            with transaction.atomic():
                lock_in_pk_order(Device, [lower.id])
                holding.set()
                wait_for_lock_wait("the repair")
                lock_in_pk_order(Device, [higher.id])
        except BaseException as exc:
            errors.append(exc)
        finally:
            connections.close_all()

    def repair():
        try:
            holding.wait(10)
            repair_record(device_id=higher.id, summary="reseated", parts=[], rerun=RepairRerun.ALL, actor="user:ops")
        except BaseException as exc:
            errors.append(exc)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=other_writer), threading.Thread(target=repair)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert not any(t.is_alive() for t in threads)
    assert not errors, errors
    assert Device.objects.get(id=higher.id).state == DeviceState.BURN_IN
    assert Repair.objects.filter(device_id=higher.id).count() == 1


# --- the fleet file against a reconcile page ----------------------------------------------------------

FLEET_FILE = """
sites:
  - slug: lon-1
    satellites: [{name: sat-a}]
    devices:
      - {hostname: n0, serial: S0, resource_class: gpu.h200.8x, state: decommissioned, enrolled: true}
"""


@pytest.fixture
def certifiable(fleet):
    """n0 in burn-in whose evidence passed: the next reconcile page certifies and accepts it."""
    satellite = fleet.satellite(fleet.site("lon-1"), "sat-a")
    diag = fleet.requirement(fleet.policy(RC), "gpu-diag")
    device = fleet.device(satellite, RC, hostname="n0")
    Device.objects.filter(id=device.id).update(serial="S0")
    evaluate_now(fleet.execution(diag, device=device, metrics={"diag_failed_tests": {"value": 0}}))
    return satellite, device


def _unbroken(device) -> list[DeviceStateChange]:
    """The device's history, asserted unbroken: each entry starts where the one before ended, and the
    last ends where the device is."""
    history = list(DeviceStateChange.objects.filter(device=device, held=False).order_by("at", "id"))
    for before, after in zip(history, history[1:], strict=False):
        assert after.from_state == before.to_state, [(h.from_state, h.to_state, h.cause) for h in history]
    assert history and history[-1].to_state == Device.objects.get(id=device.id).state
    return history


def _apply(path) -> str:
    """`fleet apply -f path`: what it wrote to stderr when it refused ("" when it applied)."""
    err = io.StringIO()
    try:
        call_command("apply", "-f", str(path), stderr=err, stdout=io.StringIO())
    except CommandError as exc:
        return f"{err.getvalue()}{exc}"
    return ""


@pytest.mark.django_db(transaction=True)
def test_a_fleet_apply_racing_a_reconcile_page_that_moved_the_device_refuses_naming_it(certifiable, tmp_path):
    """The page has certified and accepted n0 and not committed yet; the file, checked against n0 in
    burn-in, would decommission it. The apply waits for the page's lock, then finds n0 moved and
    refuses, naming it: the page's move stands, with its history entry, and the file wrote nothing."""
    satellite, device = certifiable
    path = tmp_path / "fleet.yaml"
    path.write_text(FLEET_FILE)
    holding, errors, said = threading.Event(), [], []

    def page():
        try:
            with transaction.atomic():
                sweep(satellite)
                holding.set()
                wait_for_lock_wait("the fleet apply")
        except BaseException as exc:
            errors.append(exc)
        finally:
            connections.close_all()

    def apply():
        try:
            holding.wait(10)
            said.append(_apply(path))
        except BaseException as exc:
            errors.append(exc)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=page), threading.Thread(target=apply)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert not any(t.is_alive() for t in threads) and not errors, errors
    (refusal,) = said
    assert "n0 is accepted now, not burn_in" in refusal and "nothing was written" in refusal, refusal
    assert Device.objects.get(id=device.id).state == DeviceState.ACCEPTED
    history = _unbroken(device)
    assert [(h.from_state, h.to_state, h.cause) for h in history] == [
        (DeviceState.BURN_IN, DeviceState.ACCEPTED, TransitionCause.CERTIFICATE_ISSUED)
    ]
    assert Device.objects.get(id=device.id).serial == "S0"
    # applied again, the file is judged against where n0 is now (the service moved it: left as it is)
    assert _apply(path) == ""
    assert Device.objects.get(id=device.id).state == DeviceState.ACCEPTED


@pytest.mark.django_db(transaction=True)
def test_a_reconcile_page_racing_a_fleet_apply_that_moved_the_device_leaves_it_where_the_file_put_it(
    certifiable, tmp_path
):
    """The other order: the file decommissions n0 and has not committed; the page waits for n0's lock,
    then finds it decommissioned (not enrolled: no certificate, no move)."""
    satellite, device = certifiable
    path = tmp_path / "fleet.yaml"
    path.write_text(FLEET_FILE)
    holding, errors, said = threading.Event(), [], []

    def apply():
        try:
            with transaction.atomic():
                said.append(_apply(path))
                holding.set()
                wait_for_lock_wait("the reconcile page")
        except BaseException as exc:
            errors.append(exc)
        finally:
            connections.close_all()

    def page():
        try:
            holding.wait(10)
            sweep(satellite)
        except BaseException as exc:
            errors.append(exc)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=apply), threading.Thread(target=page)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert not any(t.is_alive() for t in threads) and not errors, errors
    assert said == [""]
    history = _unbroken(device)
    assert [(h.from_state, h.to_state, h.cause) for h in history] == [
        (DeviceState.BURN_IN, DeviceState.DECOMMISSIONED, TransitionCause.FLEET_FILE)
    ]
