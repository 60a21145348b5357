"""The whole system: jobs created through the Job path are claimed, executed, evaluated and
reconciled by a real agent against a real server; reruns fix the transient faults only."""

from __future__ import annotations

import os
import signal
import time
from collections import Counter

import pytest

from fleet.burnin.models import PolicyProgress, TestExecution
from fleet.jobs.models import Job, JobDevice
from fleet.policies.models import Requirement
from fleet_agent.executors.simulated import SimulatedExecutor
from tests.e2e.conftest import log_lines, sat_a_devices

pytestmark = pytest.mark.e2e

FAULTY_SHARE = 0.3


def choose_seed(devices) -> tuple[int, SimulatedExecutor]:
    """A seed whose faults at sat-a include a permanent and a transient single-node failure, and
    leave at least one rack without any faulty device."""
    single_node_tests = {"dcgm-diag", "gpu-health", "hbm-bandwidth", "nvbandwidth", "nccl-all-reduce", "ib-write-bw"}
    racks = {d.hostname[:3] for d in devices}
    for seed in range(1, 1000):
        simulator = SimulatedExecutor(seed=seed, faulty_share=FAULTY_SHARE)
        faults = [f for d in devices if (f := simulator.fault_of(d.hostname)) and f.tests & single_node_tests]
        faulty_racks = {d.hostname[:3] for d in devices if simulator.fault_of(d.hostname)}
        if any(f.permanent for f in faults) and any(not f.permanent for f in faults) and racks - faulty_racks:
            return seed, simulator
    raise AssertionError("no seed gives both kinds of fault")


def expected_failures(devices, simulator, *, attempt: int) -> set[tuple[str, str]]:
    tests = dict(
        Requirement.objects.filter(policy__resource_class="gpu.h200.8x", scope="single_node").values_list(
            "name", "test"
        )
    )
    failing = set()
    for device in devices:
        fault = simulator.fault_of(device.hostname)
        if fault and fault.active(attempt):
            failing |= {(device.hostname, name) for name, test in tests.items() if test in fault.tests}
    return failing


def single_node_verdicts() -> dict[tuple[str, str], str]:
    return {
        (row.device.hostname, row.requirement.name): row.verdict
        for row in PolicyProgress.objects.filter(device__isnull=False, device__satellite__name="sat-a").select_related(
            "device", "requirement"
        )
    }


def test_jobs_run_evaluate_reconcile_and_reruns_fix_only_transient_faults(stack):
    devices = sat_a_devices()
    seed, simulator = choose_seed(devices)
    env = {"FLEET_AGENT_SEED": str(seed), "FLEET_AGENT_FAULTY_SHARE": str(FAULTY_SHARE)}

    first = stack.agent("once", **env)  # heartbeat, nothing to run, reconcile: every target not_run
    assert Counter(single_node_verdicts().values()) == {"not_run": 16 * 7}
    assert any("phase 2" in line["message"] for line in log_lines(first))

    dispatched = stack.dispatch([d.id for d in devices])
    assert len(dispatched["created_jobs"]) == 16
    assert {g["reason"] for g in dispatched["skips"]} == {"topology_cohort_blocked"}

    stack.agent("once", **env)
    assert set(Job.objects.values_list("status", flat=True)) == {"succeeded"}
    assert not JobDevice.objects.filter(active=True).exists()
    assert TestExecution.objects.filter(status="completed").count() == 16 * 7
    verdicts = single_node_verdicts()
    failing = expected_failures(devices, simulator, attempt=1)
    assert failing and {k for k, v in verdicts.items() if v == "failed"} == failing
    assert {v for k, v in verdicts.items() if k not in failing} == {"passed"}

    failed_devices = {d.id for d in devices if d.hostname in {host for host, _ in failing}}
    rerun = stack.dispatch(failed_devices)
    rerun_requirements = {
        (host, r["name"])
        for job in rerun["created_jobs"]
        for host in [next(d.hostname for d in devices if str(d.id) == job["device_ids"][0])]
        for r in Job.objects.get(id=job["job_id"]).parameters["requirements"]
    }
    assert rerun_requirements == failing  # only what the policy still needs

    stack.agent("once", **env)
    verdicts = single_node_verdicts()
    still_failing = expected_failures(devices, simulator, attempt=2)
    assert still_failing and still_failing < failing
    assert {k for k, v in verdicts.items() if v == "failed"} == still_failing
    assert all(verdicts[k] == "passed" for k in failing - still_failing)

    # Racks whose members all pass now run their collective as one job.
    clean = stack.dispatch([d.id for d in devices])
    racks = [j for j in clean["created_jobs"] if j["workflow_name"] == "MultiNodeBurnInCollectiveWorkflow"]
    stack.agent("once", **env)
    rack_verdicts = dict(
        PolicyProgress.objects.filter(topology__isnull=False, satellite__name="sat-a").values_list(
            "topology__label", "verdict"
        )
    )
    hostnames = {str(d.id): d.hostname for d in devices}
    healthy_racks = {
        j["topology"]["label"]
        for j in racks
        if not any(simulator.fault_of(hostnames[device_id]) for device_id in j["device_ids"])
    }
    assert healthy_racks and all(rack_verdicts[label] == "passed" for label in healthy_racks)
    assert not JobDevice.objects.filter(active=True).exists()


def test_a_fatal_xid_during_a_passing_burn_in_fails_only_the_health_window(stack):
    """Every burn-in number of a01-n02 passes, but the kernel log of its job's window holds an Xid 79: the
    health-window execution (run last) carries it and its requirement fails; a01-n01 passes everything."""
    devices = sat_a_devices()[:2]
    env = {"FLEET_AGENT_FAULTY_SHARE": "0", "FLEET_AGENT_HEALTH_FAULTS": "a01-n02:xid"}
    stack.agent("once", **env)
    stack.dispatch([d.id for d in devices])

    stack.agent("once", **env)

    verdicts = {k: v for k, v in single_node_verdicts().items() if k[0] in {"a01-n01", "a01-n02"}}
    assert {v for k, v in verdicts.items() if k[0] == "a01-n01"} == {"passed"}
    assert {k[1] for k, v in verdicts.items() if v == "failed"} == {"gpu-health-window"}
    assert verdicts[("a01-n02", "gpu-health-window")] == "failed"
    # the first window (the Xid 79 then asks for a reboot and the burn-in again: docs/remediation.md)
    window = TestExecution.objects.filter(device=devices[1], requirement__name="gpu-health-window").earliest(
        "created_at"
    )
    assert window.metrics["xid_fatal_count"]["value"] == 1
    assert window.metrics["xid_fatal_count"]["statistics"] == {"0000:19:00": 1}
    others = TestExecution.objects.filter(job_id=window.job_id).exclude(id=window.id)
    assert all(other.finished_at <= window.started_at for other in others)  # the window closes the job


def test_killing_the_agent_mid_job_leaves_nothing_stuck_or_duplicated(stack):
    devices = sat_a_devices()[:4]  # rack-a01
    stack.agent("once")
    stack.dispatch([d.id for d in devices])
    slow = {
        "FLEET_AGENT_TIME_SCALE": "0.002",
        "FLEET_AGENT_CONCURRENCY": "1",
        "FLEET_AGENT_JOBS_INTERVAL": "0.2",
        "FLEET_AGENT_FAULTY_SHARE": "0",
    }
    agent = stack.spawn_agent("run", **slow)
    try:
        deadline = time.monotonic() + 60
        while not TestExecution.objects.filter(status="running").exists():
            assert time.monotonic() < deadline, "the agent never started an execution"
            assert agent.poll() is None, agent.stderr.read()[-3000:]
            time.sleep(0.1)
    finally:
        os.kill(agent.pid, signal.SIGKILL)
        agent.wait(10)
    interrupted = TestExecution.objects.get(status="running")
    held_job = interrupted.job_id

    stack.agent("once", FLEET_AGENT_FAULTY_SHARE="0")

    interrupted.refresh_from_db()
    assert interrupted.status == "errored" and "restarted" in interrupted.error
    assert Job.objects.get(id=held_job).status == "failed"
    assert not Job.objects.filter(status__in=["queued", "running"]).exists(), "a job was left stuck"
    assert not JobDevice.objects.filter(active=True).exists(), "a device was left held"
    keys = Counter(TestExecution.objects.values_list("job_id", "requirement_id", "device_id", "topology_id"))
    assert max(keys.values()) == 1, "an execution was duplicated"
    assert set(Job.objects.exclude(id=held_job).values_list("status", flat=True)) <= {"succeeded"}


def test_sigterm_finishes_the_report_in_flight(stack):
    devices = sat_a_devices()[:1]
    stack.agent("once")
    stack.dispatch([d.id for d in devices])
    agent = stack.spawn_agent(
        "run", FLEET_AGENT_TIME_SCALE="0.01", FLEET_AGENT_JOBS_INTERVAL="0.2", FLEET_AGENT_FAULTY_SHARE="0"
    )
    deadline = time.monotonic() + 60
    while not TestExecution.objects.filter(status="running").exists():
        assert time.monotonic() < deadline and agent.poll() is None
        time.sleep(0.1)
    agent.send_signal(signal.SIGTERM)
    _, stderr = agent.communicate(timeout=60)
    assert agent.returncode == 0, stderr[-3000:]
    assert not TestExecution.objects.filter(status="running").exists()
    assert TestExecution.objects.filter(status="errored", error__contains="stopping").count() == 1
    assert Job.objects.get().status == "failed"
    assert not JobDevice.objects.filter(active=True).exists()


def test_a_restart_after_the_final_report_landed_leaves_the_result_alone(stack):
    """SIGKILL between the final report and the state update: recovery must not turn the
    completed execution into an errored one, nor fail the finished job."""
    import json

    devices = sat_a_devices()[:1]
    stack.agent("once")
    stack.dispatch([d.id for d in devices])
    stack.agent("once", FLEET_AGENT_FAULTY_SHARE="0")
    done = TestExecution.objects.filter(status="completed").order_by("created_at").first()
    job = Job.objects.get()
    state = stack.state_dir / "state.json"
    saved = json.loads(state.read_text())
    saved["in_flight"][str(done.id)] = {
        "requirement": done.requirement.name,
        "device_id": str(devices[0].id),
        "job_id": str(job.id),
        "status": "running",
        "parameters": {},
    }
    saved["jobs"][str(job.id)] = "running"
    state.write_text(json.dumps(saved))
    stack.agent("once", FLEET_AGENT_FAULTY_SHARE="0")
    done.refresh_from_db()
    assert done.status == "completed" and done.metrics
    assert Job.objects.get().status == "succeeded"
    assert json.loads(state.read_text())["in_flight"] == {}
