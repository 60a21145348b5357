"""The bring-up with real processes (part `bringup`, at `--scale small` or with `--bringup-processes`):
a real `fleet serve` (its autopilot loop a child of it, as in production) and a real `fleet-agent run`
with the simulated executor on a compressed clock (`TIME_SCALE`: a simulated minute is
`60 × TIME_SCALE` seconds), the technician in this process (`fleet.demo.story.Technician`: the
simulated hardware's repairs log, then `repair_record`, when the blast radius has room for the
re-burn-in). The hall is `bench.bringup`'s, its single-node requirements on `dcgm-diag` and its
collectives on `nccl-all-reduce-multinode` with a bus-bandwidth threshold.

The faults are the executor's own (seeded from the hostnames, `fleet_agent.executors.simulated`):
`FAULTY_SHARE` of the devices have one, `TRANSIENT_SHARE` of those show it on the first attempt only;
a fault counts when one of the policy's tests sees it (a `dcgm_diag_failure` fails both single-node
requirements; an NVLink or HCA fault only the collective: culprit isolation's case). The bound is
`bench.bringup.lower_bound` with the executor's durations.

Unlike the discrete-event run, every step here costs real time: an agent's poll, an evaluation, a
reconcile sweep, the autopilot's wake-up, each on 2 shared cores. They are on the critical path and in
the figure (a second of wall time is `1 / (60 × TIME_SCALE)` simulated minutes), which is why this run
says how much of its time the processes' own latency took (`latency_h`: the time beyond the bound of
the same hall played by the discrete-event loop is not measured here; the two runs are printed side by
side).
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any
from uuid import UUID

from django.db.models import Count

from bench.bringup import (
    COLLECTIVES,
    DOMAINS,
    MAX_UNDER_TEST,
    RACKS,
    REPAIR_AFTER,
    REQUIREMENTS,
    FaultSet,
    Hall,
    _hall,
    lower_bound,
)
from bench.server import REPO, FleetServer
from fleet.autopilot.models import AutopilotAction, SiteAutopilot
from fleet.burnin.models import TestExecution
from fleet.core.exceptions import FleetError
from fleet.demo.story import Technician
from fleet.inventory.models import Device, TopologyMembership
from fleet.inventory.services import satellite_credentials_issue
from fleet.jobs.models import JobDevice
from fleet.lifecycle.models import DeviceStateChange
from fleet.policies.models import ParameterProfile, ThresholdRule
from fleet.repairs.services import repair_record
from fleet_agent.executors.base import Target, TestRun
from fleet_agent.executors.simulated import MULTINODE_TEST, SCALE_OUT_MODES, SimulatedExecutor
from fleet_rules.vocabulary import DeviceState, RepairRerun, TopologyUnit

#: Seconds of wall time per simulated second: a 30 min dcgm-diag takes 7.5 s, the 4 h repair wait 60 s.
TIME_SCALE = 1 / 240
SEED = 42
FAULTY_SHARE, TRANSIENT_SHARE = 0.08, 0.25
#: A collective passes at 90 % of the class's healthy bus bandwidth (a degraded member costs 25-30 %).
BUSBW = {"rack-nccl": 335.0, "nvl72-nccl": 733.0}
#: How often the agent polls and sweeps, and the autopilot's pass when nothing wakes it (seconds).
AGENT_INTERVALS = {"JOBS": "0.5", "EVALUATE": "0.5", "RECONCILE": "1", "HEARTBEAT": "5"}
AUTOPILOT_INTERVAL = "1"
WALL_LIMIT_S = 600.0


@dataclass
class ProcessBringUp:
    devices: int
    time_scale: float
    lower_bound_h: float
    critical_path_h: float
    capacity_bound_h: float
    critical_rack: str
    time_h: float | None
    test_hours: float
    minimum_hours: float
    escapes: int
    false_repairs: int
    good_devices: int
    max_under_test_seen: int
    faults: dict[str, int]
    actions: dict[str, int]
    wall_s: float

    def figures(self) -> dict[str, Any]:
        ratio = self.time_h / self.lower_bound_h if self.time_h is not None else None
        return {
            "bringup_processes_devices": self.devices,
            "bringup_processes_time_scale": self.time_scale,
            "bringup_processes_lower_bound_h": round(self.lower_bound_h, 2),
            "bringup_processes_critical_path_h": round(self.critical_path_h, 2),
            "bringup_processes_capacity_bound_h": round(self.capacity_bound_h, 2),
            "bringup_processes_critical_rack": self.critical_rack,
            "bringup_processes_time_h": round(self.time_h, 2) if self.time_h is not None else None,
            "bringup_processes_time_vs_lower_bound": round(ratio, 3) if ratio is not None else None,
            "bringup_processes_test_hours_vs_minimum": round(self.test_hours / self.minimum_hours, 3),
            "bringup_processes_escapes": self.escapes,
            "bringup_processes_false_repairs": self.false_repairs,
            "bringup_processes_good_devices": self.good_devices,
            "bringup_processes_max_under_test_seen": self.max_under_test_seen,
            "bringup_processes_faults": self.faults,
            "bringup_processes_actions": self.actions,
            "bringup_processes_wall_s": round(self.wall_s, 1),
        }


def _executor() -> SimulatedExecutor:
    return SimulatedExecutor(SEED, faulty_share=FAULTY_SHARE, transient_share=TRANSIENT_SHARE, slow_share=0.0)


def _minutes(executor: SimulatedExecutor) -> dict[str, float]:
    """Each requirement's minutes as the executor runs it (its nominal duration, no slow runs)."""
    out = {}
    for name, (rc, test, _unit, _m) in REQUIREMENTS.items():
        target = Target(device_id="d", hostname="h", resource_class=rc)
        run = TestRun(requirement=name, test=test, parameters={"level": 3}, targets=(target,))
        out[name] = executor.nominal_duration_s(run) / 60
    return out


def _faults(hall: Hall, executor: SimulatedExecutor) -> FaultSet:
    """The executor's faults that this policy's tests see, by device."""
    hard: dict[UUID, tuple[str, ...]] = {}
    flaky: dict[UUID, tuple[str, ...]] = {}
    collective_only: set[UUID] = set()
    hostnames = dict(Device.objects.filter(id__in=list(hall.devices)).values_list("id", "hostname"))
    for device_id, rc in hall.devices.items():
        fault = executor.fault_of(hostnames[device_id])
        if fault is None:
            continue
        failing = tuple(
            n for n, (c, test, unit, _m) in REQUIREMENTS.items() if c == rc and unit is None and test in fault.tests
        )
        # as the executor slows a collective: not one inside an NVLink domain for a degraded HCA
        collective = MULTINODE_TEST in fault.tests and any(
            c == rc and unit is not None and not (unit == TopologyUnit.NVLINK_DOMAIN and fault.mode in SCALE_OUT_MODES)
            for c, _t, unit, _m in REQUIREMENTS.values()
        )
        if not failing and not collective:
            continue  # a fault this policy does not test for
        if not fault.permanent:
            flaky[device_id] = failing or tuple(n for n in COLLECTIVES if REQUIREMENTS[n][0] == rc)
        elif failing:
            hard[device_id] = failing
        else:
            collective_only.add(device_id)
    return FaultSet(hard, flaky, frozenset(collective_only))


def _policy_for_the_executor(hall: Hall) -> None:
    """The collectives judged on bus bandwidth (the executor's multinode metric), not the diag count."""
    for name, floor in BUSBW.items():
        requirement = hall.requirements.get(name)
        if requirement is None:
            continue
        requirement.thresholds.all().delete()
        ThresholdRule.objects.create(requirement=requirement, metric="busbw_gbps", comparator="gte", threshold=floor)
    ParameterProfile.objects.filter(test="dcgm-diag").update(parameters={"level": 3})


def processes_measure(*, scale: float, progress: Callable[[str], None]) -> ProcessBringUp:
    began = time.perf_counter()
    racks = max(4, round(RACKS * scale))
    hall = _hall("procs", racks=racks, domains=DOMAINS, seed=SEED, story_faults=False)
    _policy_for_the_executor(hall)
    executor = _executor()
    faults = _faults(hall, executor)
    minutes = _minutes(executor)
    bound = lower_bound(hall, MAX_UNDER_TEST, faults=faults, minutes=minutes)
    faulty = set(faults.hard) | faults.collective_only
    target = set(hall.devices) - faulty
    progress(
        f"bring-up (processes): {len(hall.devices)} devices, {len(faults.hard)} hard faults, "
        f"{len(faults.collective_only)} only a collective sees, {len(faults.flaky)} flaky; bound "
        f"{bound.value.total_seconds() / 3600:.1f} h ≈ {bound.value.total_seconds() * TIME_SCALE:.0f} s of wall time"
    )
    SiteAutopilot.objects.create(
        site=hall.site, enabled=True, max_under_test=MAX_UNDER_TEST, backoff=timedelta(minutes=10) * TIME_SCALE
    )
    issued = satellite_credentials_issue(satellite=hall.satellite)
    state = Path(tempfile.mkdtemp(prefix="bench-agents-"))
    technician = Technician(state)
    agent_state = state / hall.site.slug / hall.satellite.name
    agent_state.mkdir(parents=True)
    repair_wait_s = REPAIR_AFTER.total_seconds() * TIME_SCALE
    entered: dict[UUID, float] = {}
    repaired: set[UUID] = set()
    max_seen = 0
    done_at: float | None = None
    with FleetServer(env={"FLEET_AUTOPILOT_INTERVAL": AUTOPILOT_INTERVAL}) as server, tempfile.TemporaryFile() as log:
        env = {
            **os.environ,
            "FLEET_AGENT_API": server.base,
            "FLEET_AGENT_SITE": hall.site.slug,
            "FLEET_AGENT_SATELLITE": hall.satellite.name,
            "FLEET_AGENT_CLIENT_ID": issued.client_id,
            "FLEET_AGENT_CLIENT_SECRET": issued.client_secret,
            "FLEET_AGENT_EXECUTOR": "simulated",
            "FLEET_AGENT_SEED": str(SEED),
            "FLEET_AGENT_TIME_SCALE": str(TIME_SCALE),
            "FLEET_AGENT_FAULTY_SHARE": str(FAULTY_SHARE),
            "FLEET_AGENT_TRANSIENT_SHARE": str(TRANSIENT_SHARE),
            "FLEET_AGENT_SLOW_SHARE": "0",
            "FLEET_AGENT_CONCURRENCY": str(MAX_UNDER_TEST),
            "FLEET_AGENT_STATE_DIR": str(agent_state),
            "FLEET_AGENT_LOG_LEVEL": "WARNING",
            "FLEET_AGENT_INVENTORY_INTERVAL": "0",
            **{f"FLEET_AGENT_{k}_INTERVAL": v for k, v in AGENT_INTERVALS.items()},
        }
        agent = subprocess.Popen(
            [sys.executable, "-m", "fleet_agent", "run"], env=env, cwd=REPO, stdout=log, stderr=subprocess.STDOUT
        )
        started = time.monotonic()
        last_said = started
        try:
            while time.monotonic() - started < WALL_LIMIT_S:
                if agent.poll() is not None:
                    log.seek(0)
                    raise RuntimeError(f"fleet-agent exited: {log.read()[-2000:].decode(errors='replace')}")
                now = time.monotonic()
                under = JobDevice.objects.filter(active=True, device__site=hall.site).count()
                max_seen = max(max_seen, under)
                for device_id in Device.objects.filter(site=hall.site, state=DeviceState.NEEDS_REPAIR).values_list(
                    "id", flat=True
                ):
                    entered.setdefault(device_id, now)
                for device_id, at in sorted(entered.items(), key=lambda kv: kv[1]):
                    if device_id in repaired or now - at < repair_wait_s or under >= MAX_UNDER_TEST:
                        continue
                    if JobDevice.objects.filter(device_id=device_id, active=True).exists():
                        continue
                    device = Device.objects.select_related("site", "satellite").get(id=device_id)
                    part = technician.swap_gpu(device)
                    try:
                        repair_record(
                            device_id=device_id,
                            summary="bench technician",
                            parts=[part],
                            rerun=RepairRerun.ALL,
                            actor="bench",
                        )
                    except FleetError:
                        continue
                    repaired.add(device_id)
                    under += 1
                accepted = Device.objects.filter(id__in=target, state=DeviceState.ACCEPTED).count()
                if accepted == len(target):
                    done_at = now
                    break
                if now - last_said > 15:
                    last_said = now
                    simulated_h = (now - started) / TIME_SCALE / 3600
                    progress(
                        f"bring-up (processes): {simulated_h:.1f} h simulated, {accepted} of {len(target)} accepted"
                    )
                time.sleep(0.25)
        finally:
            agent.terminate()
            try:
                agent.wait(30)
            except subprocess.TimeoutExpired:
                agent.kill()
                agent.wait(10)
    elapsed = (done_at - started) if done_at is not None else None
    members = dict(
        TopologyMembership.objects.filter(topology__site=hall.site).values_list("topology_id").annotate(n=Count("id"))
    )
    seconds = 0.0
    for device_id, topology_id, began_at, ended_at in TestExecution.objects.filter(
        job__site=hall.site, started_at__isnull=False, finished_at__isnull=False
    ).values_list("device_id", "topology_id", "started_at", "finished_at"):
        seconds += (ended_at - began_at).total_seconds() * (members.get(topology_id, 1) if device_id is None else 1)
    sent = set(
        DeviceStateChange.objects.filter(
            device__site=hall.site, to_state=DeviceState.NEEDS_REPAIR, held=False
        ).values_list("device_id", flat=True)
    )
    escapes = Device.objects.filter(id__in=faulty - repaired, state=DeviceState.ACCEPTED).count()
    minimum = sum(
        sum(minutes[n] for n, (c, _t, _u, _m) in REQUIREMENTS.items() if c == rc) for rc in hall.devices.values()
    )
    actions = dict(
        AutopilotAction.objects.filter(site=hall.site).values_list("kind").annotate(n=Count("id")).order_by()
    )
    return ProcessBringUp(
        devices=len(hall.devices),
        time_scale=TIME_SCALE,
        lower_bound_h=bound.value.total_seconds() / 3600,
        critical_path_h=bound.critical.total_seconds() / 3600,
        capacity_bound_h=bound.capacity.total_seconds() / 3600,
        critical_rack=bound.critical_rack,
        time_h=elapsed / TIME_SCALE / 3600 if elapsed is not None else None,
        test_hours=seconds / TIME_SCALE / 3600,
        minimum_hours=minimum / 60,
        escapes=escapes,
        false_repairs=len(sent - faulty),  # a flaky device is good: sending it to repair is false
        good_devices=len(target),
        max_under_test_seen=max_seen,
        faults={"hard": len(faults.hard), "collective_only": len(faults.collective_only), "flaky": len(faults.flaky)},
        actions=actions,
        wall_s=time.perf_counter() - began,
    )
