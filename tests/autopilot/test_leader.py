"""One leader across processes (PostgreSQL, two real `fleet autopilot` processes): only one acts;
kill it (SIGKILL, no goodbye) and the other takes over within a bounded time; no device is acted on
twice. And an operator's dispatch racing the autopilot's leaves one active job per device."""

from __future__ import annotations

import contextlib
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pytest
from django.db import connections

from fleet.autopilot.models import AutopilotAction, SiteAutopilot
from fleet.autopilot.services import autopilot_pass
from fleet.burnin.reruns.service import rerun_dispatch
from fleet.core.exceptions import FleetError
from fleet.jobs.models import Job, JobDevice
from fleet_rules.vocabulary import AutopilotActionKind, PlanningMode, WorkflowName
from tests.burnin.sweeps import sweep_service
from tests.helpers import REPO, fleet_env

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

#: How long the survivor may take to act after the leader is killed (its poll of the lock is 1 s,
#: its pass interval 0.5 s; PostgreSQL ends the killed leader's session at once).
TAKEOVER_S = 15


def autopilot(log: Path) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "fleet", "autopilot", "--interval", "0.5"],
        env=fleet_env(FLEET_LOG_FORMAT="text"),
        cwd=REPO,
        stdout=log.open("w"),
        stderr=subprocess.STDOUT,
    )


def hall(fleet, devices: int):
    site = fleet.site("lon-1")
    satellite = fleet.satellite(site, "sat-a", workflows=list(WorkflowName.values))
    policy = fleet.policy("gpu.h200.8x")
    fleet.requirement(policy, "gpu-diag")
    fleet.profile("gpu.h200.8x", "dcgm-diag", {"level": 2})
    rack = fleet.topology(satellite, "rack", "rack-a00")
    made = [fleet.device(satellite, hostname=f"a00-n{i:02d}", topologies=[rack]) for i in range(devices)]
    sweep_service("lon-1", "sat-a", "gpu.h200.8x")
    return site, satellite, rack, made


def wait_for(condition, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = condition()
        if found:
            return found
        time.sleep(0.2)
    raise AssertionError(f"not within {timeout} s: {what}")


def test_one_leader_acts_and_the_other_takes_over_when_it_is_killed(fleet):
    site, satellite, rack, devices = hall(fleet, 4)
    logs = [Path(tempfile.mkstemp(prefix="autopilot-", suffix=".log")[1]) for _ in range(2)]
    processes = [autopilot(logs[0]), autopilot(logs[1])]
    try:
        time.sleep(2)  # both running, one leading
        SiteAutopilot.objects.create(site=site, enabled=True, max_under_test=64)
        first = wait_for(lambda: AutopilotAction.objects.first(), 20, "the leader's first action")
        leader_pid = int(first.actor.rsplit(":", 1)[1])
        (leader,) = [p for p in processes if p.pid == leader_pid]
        (survivor,) = [p for p in processes if p.pid != leader_pid]
        time.sleep(2)  # the other process, not leading, has done nothing meanwhile
        assert set(AutopilotAction.objects.values_list("actor", flat=True)) == {first.actor}

        leader.send_signal(signal.SIGKILL)
        leader.wait()
        killed_at = time.monotonic()
        more = [fleet.device(satellite, hostname=f"a00-n{i:02d}", topologies=[rack]) for i in range(4, 7)]
        sweep_service("lon-1", "sat-a", "gpu.h200.8x")
        taken_over = wait_for(
            lambda: AutopilotAction.objects.filter(actor__endswith=f":{survivor.pid}").first(),
            TAKEOVER_S,
            "the survivor's first action",
        )
        took = time.monotonic() - killed_at
        assert taken_over.kind == AutopilotActionKind.DISPATCH
        assert set(taken_over.device_ids) == {str(d.id) for d in more}, "the survivor redid the leader's work"
        time.sleep(2)
    finally:
        for process in processes:
            if process.poll() is None:
                process.terminate()
                process.wait(timeout=20)
        output = "\n".join(log.read_text() for log in logs)
        for log in logs:
            log.unlink()
    # No device acted on twice: one job each, and the log's dispatches are disjoint.
    per_device = [d for job in Job.objects.all() for d in job.job_devices.values_list("device_id", flat=True)]
    assert sorted(map(str, per_device)) == sorted(str(d.id) for d in [*devices, *more])
    dispatched = [d for a in AutopilotAction.objects.filter(kind="dispatch") for d in a.device_ids]
    assert len(dispatched) == len(set(dispatched)) == 7
    assert "Traceback" not in output, output[-3000:]
    assert took < TAKEOVER_S


def test_an_operator_dispatch_racing_the_autopilot_leaves_one_active_job_per_device(fleet):
    site, _satellite, _rack, devices = hall(fleet, 8)
    SiteAutopilot.objects.create(site=site, enabled=True, max_under_test=64)
    ids = [d.id for d in devices]
    errors: list[BaseException] = []
    start = threading.Barrier(2)

    def operator() -> None:
        try:
            start.wait()
            for _ in range(5):
                with contextlib.suppress(FleetError):
                    rerun_dispatch(site=site, device_ids=ids, mode=PlanningMode.NON_PASSING, requested_by="user:ops")
        except BaseException as exc:
            errors.append(exc)
        finally:
            connections.close_all()

    def pilot() -> None:
        try:
            start.wait()
            for _ in range(5):
                autopilot_pass(site=site, actor="autopilot@race")
        except BaseException as exc:
            errors.append(exc)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=operator), threading.Thread(target=pilot)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not errors, errors
    active = list(JobDevice.objects.filter(active=True).values_list("device_id", flat=True))
    assert sorted(map(str, active)) == sorted(map(str, ids))  # every device once, none twice
    assert Job.objects.count() == 8
    by = set(Job.objects.values_list("requested_by", flat=True))
    assert by <= {"user:ops", "autopilot@race"}
