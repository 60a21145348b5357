"""A fatal amdgpu event (an AMD Instinct GPU's RAS error or reset, `fleet_rules.amdgpu`) in a burn-in window's
health evidence moves the device to needs_repair exactly as a fatal Xid does: same report path, same lifecycle
service, the event in words in the reason; a ring timeout alone moves nothing."""

from __future__ import annotations

import uuid

import pytest

from fleet.burnin.models import TestExecution
from fleet.inventory.models import Device
from fleet.lifecycle.models import DeviceStateChange
from fleet_rules.amdgpu import AmdgpuEventKind
from fleet_rules.vocabulary import DeviceState, TransitionCause
from tests.burnin.test_execution_health import URL, health, report

RC = "gpu.mi300x.8x"


@pytest.fixture
def amd_device(fleet):
    site = fleet.site("lon-1")
    satellite = fleet.satellite(site, "sat-c")
    rack = fleet.topology(satellite, "rack", "rack-c01")
    device = fleet.device(satellite, RC, hostname="c01-n01", topologies=[rack])
    policy = fleet.policy(RC)
    fleet.requirement(
        policy,
        "gpu-health-window",
        test="health-window",
        thresholds=[{"metric": "amdgpu_ras_fatal_count", "comparator": "eq", "threshold": 0}],
    )
    return device


def amdgpu(kind: AmdgpuEventKind, **overrides) -> dict:
    return {
        "kind": "amdgpu",
        "code": int(kind),
        "pci_bus_id": "0000:1c:00.0",
        "message": "{1}uncorrectable hardware error(ERREVENT_ATHUB_INTERRUPT) detected!",
        "at": "2026-11-30T10:12:00Z",
    } | overrides


def test_a_fatal_ras_interrupt_moves_the_amd_device_to_repair_with_the_event_in_words(bearer, amd_device):
    execution_id = uuid.uuid4()
    sent = health(
        amdgpu(AmdgpuEventKind.RING_TIMEOUT, at="2026-11-30T10:05:00Z"), amdgpu(AmdgpuEventKind.FATAL_RAS_INTERRUPT)
    )
    response = bearer(["test-execution:report"]).put(URL.format(execution_id), report(amd_device, sent), format="json")
    assert response.status_code == 201, response.content
    assert Device.objects.get(id=amd_device.id).state == DeviceState.NEEDS_REPAIR
    (change,) = DeviceStateChange.objects.filter(device=amd_device)
    assert change.cause == TransitionCause.FATAL_XID and change.actor == "system"
    assert change.reason == (
        "amdgpu event 2 (fatal RAS interrupt (uncorrectable hardware error)) on GPU 0000:1c:00.0: repair asked; "
        "amdgpu event 20 (ring timeout (a job on the GPU hung)) on GPU 0000:1c:00.0: nothing asked during its burn-in"
    )
    assert change.refs["xid"]["kind"] == "amdgpu" and change.refs["xid"]["code"] == 2
    assert TestExecution.objects.get(id=execution_id).fatal_xids == 1


def test_a_gpu_reset_during_the_window_condemns_the_device_too(bearer, amd_device):
    sent = health(amdgpu(AmdgpuEventKind.GPU_RESET, message="amdgpu: GPU reset begin!"))
    bearer(["test-execution:report"]).put(URL.format(uuid.uuid4()), report(amd_device, sent), format="json")
    assert DeviceStateChange.objects.get(device=amd_device).reason.startswith("amdgpu event 4 (GPU reset) on GPU ")


@pytest.mark.parametrize("kind", [AmdgpuEventKind.RING_TIMEOUT, AmdgpuEventKind.CORRECTABLE_ECC])
def test_counted_amdgpu_events_move_nothing(bearer, amd_device, kind):
    response = bearer(["test-execution:report"]).put(
        URL.format(uuid.uuid4()), report(amd_device, health(amdgpu(kind))), format="json"
    )
    assert response.status_code == 201
    assert Device.objects.get(id=amd_device.id).state == DeviceState.BURN_IN
    assert not DeviceStateChange.objects.exists()
