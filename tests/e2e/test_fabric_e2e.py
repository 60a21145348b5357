"""A flapping InfiniBand link during a passing burn-in, end to end (issue 38, item 4): a real `fleet serve` and a
real `fleet-agent` (simulated executor, `health_faults` = a01-n02's first port flaps three times in the window).
Every burn-in test of the device passes; the health window reads the ports' error counters at the job's start and
at its end, and the example policy's `ib_link_downed_delta eq 0` fails it, with the port's counters as evidence. A
flap is not a fatal Xid: the device stays in burn-in. a01-n01, without the fault, passes everything."""

from __future__ import annotations

import pytest

from fleet.burnin.models import PolicyProgress, TestExecution
from fleet.inventory.models import Device
from fleet_rules.health_evidence import fabric_rows
from fleet_rules.vocabulary import DeviceState
from tests.e2e.conftest import sat_a_devices

pytestmark = pytest.mark.e2e


def test_a_link_that_flapped_during_burn_in_fails_the_health_window(stack):
    healthy, flapping = sat_a_devices()[:2]
    assert (healthy.hostname, flapping.hostname) == ("a01-n01", "a01-n02")
    env = {"FLEET_AGENT_FAULTY_SHARE": "0", "FLEET_AGENT_HEALTH_FAULTS": "a01-n02:flap"}
    stack.agent("once", **env)  # the satellite announces its workflows
    stack.dispatch([healthy.id, flapping.id])
    stack.agent("once", **env)

    verdicts = dict(PolicyProgress.objects.filter(device=flapping).values_list("requirement__name", "verdict"))
    assert verdicts.pop("gpu-health-window") == "failed"
    assert verdicts and set(verdicts.values()) == {"passed"}, verdicts  # every burn-in test passed
    assert set(PolicyProgress.objects.filter(device=healthy).values_list("verdict", flat=True)) == {"passed"}

    window = TestExecution.objects.get(device=flapping, requirement__name="gpu-health-window")
    assert window.metrics["ib_link_downed_delta"]["value"] == 3
    assert window.metrics["ib_link_downed_delta"]["statistics"]["mlx5_0/1"] == 3
    assert window.metrics["ib_link_flaps"]["value"] == 3
    assert "ib_link_downed_delta" in window.evaluation.reason
    first, *others = fabric_rows(window.health)
    assert first.port == "mlx5_0/1" and [(c.metric, c.delta) for c in first.grew] == [
        ("link_downed", 3),
        ("link_error_recovery", 3),
    ]
    assert len(others) == 7 and not any(row.grew for row in others)  # the H200's eight ports, the others quiet
    calm = TestExecution.objects.get(device=healthy, requirement__name="gpu-health-window")
    assert calm.metrics["ib_link_downed_delta"]["value"] == 0 and calm.health["fabric"]["source"] == "sysfs"

    # a link flap is judged by the policy's rule, not the fatal-Xid move: the device stays where it was
    assert Device.objects.get(id=flapping.id).state == DeviceState.BURN_IN
    page = stack.operator.get(f"/api/v1/burn-in/executions/{window.id}/").json()
    assert (
        page["health"]["fabric"]["ports"][0]["after"]["link_downed"]
        > page["health"]["fabric"]["ports"][0]["before"]["link_downed"]
    )
