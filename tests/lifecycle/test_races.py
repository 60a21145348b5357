"""Concurrent reconcile pages and repairs on the same devices keep one consistent state and history:
every history entry starts where the previous one ended, the last ends where the device is, and no
entry is lost."""

from __future__ import annotations

import threading

import pytest
from django.db import connections

from fleet.burnin.repairs import repair_record
from fleet.inventory.models import Device
from fleet.lifecycle.models import DeviceStateChange, Repair
from fleet_rules.vocabulary import DeviceState, RepairRerun, TransitionCause, WorkflowName
from tests.burnin.certs import evaluate_now, sweep

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
    for _ in range(3):
        for device in devices:
            evaluate_now(fleet.execution(diag, device=device, metrics=FAIL))
        sweep(satellite)
    assert set(Device.objects.values_list("state", flat=True)) == {DeviceState.NEEDS_REPAIR}
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
