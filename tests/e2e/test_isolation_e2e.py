"""Culprit isolation end to end: a real `fleet serve`, a real `fleet-agent` (simulated executor
with one device whose fabric fault fails every collective that includes it) and `fleet isolate`
as an operator runs it. A rack of 8 fails its collective; isolation names exactly that device
within ⌈log2 8⌉ + 1 = 4 rounds; no device is ever in two active jobs; the rack's projection row
keeps the failed cohort run's verdict."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest

from fleet.burnin.models import DeviceDiagnosis, IsolationPlan, PolicyProgress, TestExecution
from fleet.inventory.models import Device
from fleet.jobs.models import Job, JobDevice
from fleet_rules.vocabulary import IsolationStatus, JobReason
from tests.helpers import REPO, fleet_env
from tests.support.stack import running_stack

pytestmark = pytest.mark.e2e

BAD = "a01-n06"
RACK_FLEET = (
    """
sites:
  - slug: lon-1
    satellites: [{name: sat-a}]
    topologies: [{unit: rack, label: rack-a01, satellite: sat-a}]
    devices:
"""
    + "".join(
        f"      - {{hostname: a01-n{i:02d}, serial: S{i}, resource_class: gpu.h200.8x, satellite: sat-a,"
        f" state: burn_in, enrolled: true, topologies: {{rack: rack-a01}}}}\n"
        for i in range(1, 9)
    )
    + """
policies:
  - resource_class: gpu.h200.8x
    requirements:
      - name: gpu-diag
        gate: burn-in
        test: dcgm-diag
        thresholds: [{metric: diag_failed_tests, comparator: eq, threshold: 0}]
      - name: rack-nccl
        gate: rack-acceptance
        scope: multi_node
        unit: rack
        test: nccl-all-reduce-multinode
        thresholds: [{metric: busbw_gbps, comparator: gte, threshold: 340}]
parameter_profiles:
  - {resource_class: gpu.h200.8x, test: dcgm-diag, parameters: {level: 3}}
  - {resource_class: gpu.h200.8x, test: nccl-all-reduce-multinode, parameters: {iters: 20, gpus_per_node: 8}}
"""
)
AGENT = {
    "FLEET_AGENT_FAULTY_SHARE": "0",
    "FLEET_AGENT_ERRORED_SHARE": "0",
    "FLEET_AGENT_FABRIC_FAULTS": BAD,
}
FAST = {
    "FLEET_AGENT_JOBS_INTERVAL": "0.3",
    "FLEET_AGENT_EVALUATE_INTERVAL": "0.3",
    "FLEET_AGENT_RECONCILE_INTERVAL": "0.5",
    "FLEET_AGENT_HEARTBEAT_INTERVAL": "5",
}


@pytest.fixture
def rack_stack(transactional_db, settings, tmp_path):
    with running_stack(settings, tmp_path, fleet_text=RACK_FLEET) as running:
        yield running


def rack_row() -> PolicyProgress:
    return PolicyProgress.objects.get(topology__label="rack-a01", requirement__name="rack-nccl")


def test_fleet_isolate_finds_the_device_that_breaks_the_rack(rack_stack):
    stack = rack_stack
    devices = list(Device.objects.order_by("hostname"))
    stack.agent("once", **AGENT)  # heartbeat: the workflows are advertised
    singles = stack.dispatch([d.id for d in devices])
    assert len(singles["created_jobs"]) == 8  # the rack waits for its members' single-node passes
    stack.agent("once", **AGENT)
    cohort = stack.dispatch([d.id for d in devices])
    assert [len(j["device_ids"]) for j in cohort["created_jobs"]] == [8]
    stack.agent("once", **AGENT)
    failed = rack_row()
    assert failed.verdict == "failed"  # the fabric fault breaks the rack's collective

    agent = stack.spawn_agent("run", **AGENT, **FAST)
    try:
        isolate = subprocess.run(
            [
                sys.executable,
                "-m",
                "fleet",
                "isolate",
                "--site",
                "lon-1",
                "--topology",
                "rack-a01",
                "--poll",
                "0.3",
                "--timeout",
                "240",
            ],
            env=fleet_env(COLUMNS="120"),
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert isolate.returncode == 0, isolate.stdout + isolate.stderr[-4000:]
        # Let the agent reconcile once more after the last diagnostic round.
        time.sleep(2)
    finally:
        agent.terminate()
        out, err = agent.communicate(timeout=30)
    assert agent.returncode == 0, err[-4000:]
    assert "Traceback" not in err

    output = isolate.stdout
    assert f"culprit: {BAD}" in output, output
    assert "round 1/4" in output and "round 1 decided" in output, output
    (plan,) = IsolationPlan.objects.all()
    assert plan.status == IsolationStatus.FOUND and len(plan.rounds) <= 4
    bad = Device.objects.get(hostname=BAD)
    assert plan.state["culprits"] == [str(bad.id)]
    assert list(DeviceDiagnosis.objects.values_list("device__hostname", flat=True)) == [BAD]

    # No round ever held a device in two active jobs: per device, its jobs' lifetimes never overlap.
    diagnostic = Job.objects.filter(reason=JobReason.DIAGNOSIS)
    assert diagnostic.count() == sum(len(r["subsets"]) for r in plan.rounds)
    for device in devices:
        spans = sorted(
            (j.created_at, j.finished_at) for j in Job.objects.filter(job_devices__device=device).order_by("created_at")
        )
        assert all(end is not None for _, end in spans)
        assert all(spans[i][1] <= spans[i + 1][0] for i in range(len(spans) - 1)), device.hostname
    assert not JobDevice.objects.filter(active=True).exists()

    # The rack's projection row is still the failed cohort run's verdict.
    assert TestExecution.objects.filter(diagnostic=True).count() == diagnostic.count()
    after = rack_row()
    assert (after.verdict, after.execution_id) == ("failed", failed.execution_id)
