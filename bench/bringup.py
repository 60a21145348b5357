"""The bring-up benchmark (`bench/run.py --parts bringup`): how long the autopilot takes to accept a
simulated hall, against the lower bound, and how many device-hours of testing it spends, with no
faulty device accepted.

**What runs for real**: PostgreSQL and every service of the product — the autopilot's pass
(`fleet.autopilot.services.autopilot_pass`: facts, the pure decision, rerun dispatch, culprit
isolation), jobs and their claims, execution reports, evaluation upserts, reconcile sweeps (which
issue certificates and send devices to repair behind the breaker), repair records. **What is
simulated**: the agents and the hardware, in this process, on a simulated clock (a discrete-event
loop: a job's executions finish at its start plus its requirements' durations; the autopilot is
called with that clock). Not `fleet serve` and `fleet-agent` processes: on a compressed wall clock
their polling intervals, not the decisions, would set the figure.

The hall (`--scale` multiplies the racks): 64 racks of 8 H200 nodes (`gpu-diag` 30 min,
`gpu-stress` 60 min, then the rack's `rack-nccl` 20 min) and two GB200 NVL72 domains of 18 trays
(`gpu-diag` 30 min, then `nvl72-nccl` 30 min). Seeded faults: ≈3 % of nodes with a hard fault in one
single-node test, ≈1 % flaky (their first attempt of one test fails), one bad cable (one rack's
collective fails whatever its members, and bisection cannot name a device: its rack is left for a
person, and its devices count as faulty), one device whose fault shows only under its rack's
collective (the cable and this device each in a rack with no other fault). A technician repairs a
device 4 h after it entered `needs_repair` (when the blast radius has room for its re-burn-in); a
repair removes its fault.

**The lower bound** (`lower_bound`, its docstring has the formula): what no schedule within the
blast radius can beat given the hall's faults — an oracle that knows which devices are faulty —
under the product's rules: `LB = max(critical path, device-minutes / max_under_test)`, each rack's
path and minutes counted with its faults' reruns, repair and re-burn-in.

Figures: `bringup_time_vs_lower_bound` (simulated time until every device without a fault is
accepted ÷ LB), `bringup_test_hours_vs_minimum` (device-hours in jobs ÷ one run of every requirement
on every device), `bringup_escapes` (a faulty device accepted), `bringup_false_repairs` (a device
without a fault sent to repair), `bringup_max_under_test_seen`; and a second hall with a wrong
threshold that fails one whole class: `bringup_wrong_policy_devices_sent_to_repair` against the
breaker's limit, and whether the autopilot stopped dispatching that class once its breaker opened.
"""

from __future__ import annotations

import heapq
import random
import tempfile
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any
from uuid import UUID

from django.conf import settings
from django.db.models import Count
from django.utils import timezone

from fleet.autopilot.models import AutopilotAction, SiteAutopilot
from fleet.autopilot.services import autopilot_pass
from fleet.burnin.certificates.signing import signing_key_init
from fleet.burnin.evaluation_results.service import evaluation_results_upsert
from fleet.burnin.executions import ExecutionReport, execution_report
from fleet.burnin.reconcile.service import reconcile_sweep
from fleet.inventory.models import Device, Satellite, Site, Topology, TopologyMembership
from fleet.jobs.models import Job, JobDevice
from fleet.jobs.services import job_finish, jobs_claim
from fleet.lifecycle.models import Breaker
from fleet.policies.models import AcceptancePolicy, ParameterProfile, Requirement, ThresholdRule
from fleet.policies.selectors import load_resolutions
from fleet.repairs.services import repair_record
from fleet_rules.evaluations import ResultItem
from fleet_rules.lifecycle import BREAKER_MINIMUM, BREAKER_SHARE, REPAIR_AFTER_FAILURES, breaker_limit
from fleet_rules.vocabulary import DeviceState, JobReason, JobStatus, RepairRerun, WorkflowName

H200, NVL72 = "gpu.h200.8x", "gpu.gb200.nvl72"
#: Requirement → (resource class, test, scope unit or None, simulated minutes).
REQUIREMENTS: dict[str, tuple[str, str, str | None, int]] = {
    "gpu-diag": (H200, "dcgm-diag", None, 30),
    "gpu-stress": (H200, "dcgm-diag", None, 60),
    "rack-nccl": (H200, "nccl-all-reduce-multinode", "rack", 20),
    "tray-diag": (NVL72, "dcgm-diag", None, 30),
    "nvl72-nccl": (NVL72, "nccl-all-reduce-multinode", "nvlink-domain", 30),
}
COLLECTIVES = frozenset(n for n, (_c, _t, u, _m) in REQUIREMENTS.items() if u is not None)
RACKS, RACK_SIZE, DOMAINS, TRAYS = 64, 8, 2, 18
HARD_SHARE, FLAKY_SHARE = 0.03, 0.01
REPAIR_AFTER = timedelta(hours=4)
MAX_UNDER_TEST = 64
BACKOFF = timedelta(minutes=10)
ACTOR = "autopilot@bench"
METRIC = "diag_failed_tests"
#: Goals the issue holds the figures to (printed beside them; nothing asserts them).
GOALS = {"time": 1.25, "hours": 1.15, "false_repairs_share": 0.005}


@dataclass
class Faults:
    hard: dict[UUID, str] = field(default_factory=dict)  # device → the single-node requirement it fails
    flaky: dict[UUID, str] = field(default_factory=dict)  # device → the requirement whose first attempt fails
    cable_rack: UUID | None = None  # a topology whose collective fails whatever its members
    collective_only: UUID | None = None  # a device that fails every collective it is in
    repaired: set[UUID] = field(default_factory=set)
    attempts: dict[tuple[UUID, str], int] = field(default_factory=dict)

    def faulty(self, device_id: UUID) -> bool:
        return device_id not in self.repaired and (device_id in self.hard or device_id == self.collective_only)

    def with_a_fault(self) -> set[UUID]:
        return set(self.hard) | ({self.collective_only} if self.collective_only else set())


@dataclass
class Hall:
    site: Site
    satellite: Satellite
    devices: dict[UUID, str]  # id → resource class
    rack_of: dict[UUID, UUID]
    faults: Faults
    requirements: dict[str, Requirement]
    keys: dict[UUID, str]
    labels: dict[UUID, str]  # topology id → label


@dataclass
class BringUp:
    devices: int
    max_under_test: int
    lower_bound_h: float
    capacity_bound_h: float
    critical_path_h: float
    critical_rack: str
    where: dict[str, Any]  # where the time went (`_where`)
    time_h: float | None
    test_hours: float
    minimum_hours: float
    escapes: int
    false_repairs: int
    good_devices: int
    max_under_test_seen: int
    accepted: int
    passes: int
    actions: dict[str, int]
    wall_s: float

    @property
    def time_vs_lower_bound(self) -> float | None:
        return self.time_h / self.lower_bound_h if self.time_h is not None else None

    @property
    def test_hours_vs_minimum(self) -> float:
        return self.test_hours / self.minimum_hours


@dataclass
class WrongPolicy:
    devices: int
    sent_to_repair: int
    breaker_limit: int
    breaker_minimum: int
    breaker_opened: bool
    dispatched_after_open: int


def _hall(prefix: str, *, racks: int, domains: int, seed: int, wrong: bool = False, story_faults: bool = True) -> Hall:
    rng = random.Random(seed)
    site = Site.objects.create(slug=f"{prefix}-hall", name=f"{prefix} hall")
    satellite = Satellite.objects.create(
        site=site, name="sat-1", advertised_workflows=[{"name": w, "version": "1"} for w in WorkflowName.values]
    )
    requirements: dict[str, Requirement] = {}
    for resource_class in (H200, NVL72):
        policy, _ = AcceptancePolicy.objects.get_or_create(resource_class=resource_class, defaults={"version": 1})
        for name, (rc, test, unit, _minutes) in REQUIREMENTS.items():
            if rc != resource_class:
                continue
            requirement, _ = Requirement.objects.get_or_create(
                policy=policy,
                name=name,
                defaults={
                    "gate": "rack-acceptance" if unit else "burn-in",
                    "scope": "multi_node" if unit else "single_node",
                    "unit": unit,
                    "test": test,
                    "rerunnable": True,
                },
            )
            if not requirement.thresholds.exists():
                ThresholdRule.objects.create(requirement=requirement, metric=METRIC, comparator="eq", threshold=0)
            requirements[name] = requirement
            ParameterProfile.objects.get_or_create(
                resource_class=resource_class, test=test, name="default", defaults={"parameters": {"iters": 1}}
            )
    now = timezone.now()
    devices: dict[UUID, str] = {}
    rack_of: dict[UUID, UUID] = {}
    memberships = []
    made: list[Device] = []
    groups = [("rack", f"r{r:03d}", H200, RACK_SIZE) for r in range(racks)]
    groups += [("nvlink-domain", f"nvl72-{d:02d}", NVL72, TRAYS) for d in range(domains)]
    tops = {}
    for unit, label, rc, size in groups:
        topology = Topology.objects.create(site=site, satellite=satellite, unit=unit, label=label)
        tops[label] = topology
        for i in range(size):
            made.append(
                Device(
                    site=site,
                    satellite=satellite,
                    hostname=f"{label}-n{i:02d}",
                    serial=f"{prefix}-{label}-{i}",
                    resource_class=rc,
                    state=DeviceState.BURN_IN,
                    enrolled_at=now,
                )
            )
            memberships.append((len(made) - 1, topology))
    Device.objects.bulk_create(made)
    TopologyMembership.objects.bulk_create(
        TopologyMembership(device=made[i], topology=t, unit=t.unit) for i, t in memberships
    )
    for i, topology in memberships:
        devices[made[i].id] = made[i].resource_class
        rack_of[made[i].id] = topology.id
    faults = Faults()
    singles = {rc: [n for n, (c, _, u, _) in REQUIREMENTS.items() if c == rc and u is None] for rc in (H200, NVL72)}
    ids = list(devices)  # in creation order (hostnames): the seed alone picks the faults
    rng.shuffle(ids)
    hard_n, flaky_n = round(HARD_SHARE * len(ids)), round(FLAKY_SHARE * len(ids))
    for d in ids[:hard_n]:
        faults.hard[d] = rng.choice(singles[devices[d]])
    for d in ids[hard_n : hard_n + flaky_n]:
        faults.flaky[d] = rng.choice(singles[devices[d]])
    # The cable and the collective-only fault each in a rack with no other fault (one story each).
    order = {t.id: i for i, (_u, t) in enumerate(memberships)}
    touched = {rack_of[d] for d in ids[: hard_n + flaky_n]}
    clean_racks = sorted({rack_of[d] for d in ids if devices[d] == H200} - touched, key=order.get)
    if len(clean_racks) >= 2 and not wrong and story_faults:
        faults.cable_rack = clean_racks[0]
        faults.collective_only = next(d for d in ids if rack_of[d] == clean_racks[1])
    keys = {r.id: load_resolutions([(r.id, site.id)])[(r.id, site.id)].key for r in requirements.values()}
    for rc in (H200, NVL72):
        reconcile_sweep(site_slug=site.slug, satellite_name="sat-1", resource_class=rc, gate=None, limit=5000)
    labels = {t.id: label for label, t in tops.items()}
    return Hall(site, satellite, devices, rack_of, faults, requirements, keys, labels)


def _passes(hall: Hall, requirement: str, members: list[UUID], topology_id: UUID | None, wrong: bool) -> bool:
    faults = hall.faults
    if wrong and requirement == "gpu-diag":
        return False  # the wrong threshold: every device of the class fails it
    if topology_id is not None:  # a collective (or an isolation round on a subset)
        if topology_id == faults.cable_rack and len(members) == RACK_SIZE:
            return False
        return not (faults.collective_only in members and faults.faulty(faults.collective_only))
    (device,) = members
    key = (device, requirement)
    faults.attempts[key] = faults.attempts.get(key, 0) + 1
    if faults.hard.get(device) == requirement and faults.faulty(device):
        return False
    return not (faults.flaky.get(device) == requirement and faults.attempts[key] == 1)


def _payload(passed: bool) -> dict[str, Any]:
    evaluation = {"passed": passed, "threshold": 0, "comparator": "eq"}
    return {
        "passed": passed,
        "reason": None if passed else f"{METRIC}: 2 is not eq 0",
        "metric_evaluations": {
            METRIC: {"passed": passed, "value_evaluation": evaluation, "statistic_evaluations": None}
        },
    }


def _run_job(hall: Hall, job: Job, members: list[UUID], start: datetime, wrong: bool) -> datetime:
    """Report the job's executions (one per requirement, one after the other) and end it; returns
    when it ended on the simulated clock."""
    at = start
    items = []
    for name in job.requirement_names:
        minutes = REQUIREMENTS[name][3]
        finished = at + timedelta(minutes=minutes)
        passed = _passes(hall, name, members, job.topology_id, wrong)
        execution = execution_report(
            execution_id=uuid.uuid4(),
            report=ExecutionReport(
                requirement=name,
                test=None,
                device_id=None if job.topology_id else members[0],
                topology_id=job.topology_id,
                job_id=job.id,
                status="completed",
                parameters={},
                metrics={METRIC: {"value": 0 if passed else 2}},
                error="",
                started_at=at,
                finished_at=finished,
            ),
            actor=None,
            reported_by="bench",
        ).execution
        items.append(
            ResultItem(execution.id, _payload(passed), hall.keys[hall.requirements[name].id], execution.updated_at)
        )
        at = finished
    job_finish(job_id=job.id, outcome=JobStatus.SUCCEEDED)
    evaluation_results_upsert(items=items, actor=None)
    return at


def _sweep(hall: Hall) -> None:
    for rc in (H200, NVL72):
        reconcile_sweep(site_slug=hall.site.slug, satellite_name="sat-1", resource_class=rc, gate=None, limit=5000)


#: Each requirement's simulated minutes (`REQUIREMENTS`); the processes' run passes the executor's.
MINUTES = {name: float(m) for name, (_c, _t, _u, m) in REQUIREMENTS.items()}


def _minutes(rc: str, *, collective: bool, minutes: Mapping[str, float] = MINUTES) -> list[float]:
    """A class's single-node requirements' minutes in job order, or its collective's (one)."""
    return [minutes[n] for n, (c, _t, u, _m) in REQUIREMENTS.items() if c == rc and (u is not None) == collective]


@dataclass(frozen=True)
class FaultSet:
    """The faults the bound knows of: a device's failing requirements (hard: every attempt until
    repaired; flaky: its first attempt only), the devices whose fault only a collective shows, and
    a rack nobody can accept (a bad cable)."""

    hard: Mapping[UUID, tuple[str, ...]]
    flaky: Mapping[UUID, tuple[str, ...]]
    collective_only: frozenset[UUID] = frozenset()
    cable_rack: UUID | None = None

    @classmethod
    def of(cls, faults: Faults) -> FaultSet:
        return cls(
            {d: (r,) for d, r in faults.hard.items()},
            {d: (r,) for d, r in faults.flaky.items()},
            frozenset({faults.collective_only} if faults.collective_only else ()),
            faults.cable_rack,
        )


@dataclass(frozen=True)
class Bound:
    """The lower bound of a hall (`lower_bound`) and its two parts."""

    capacity: timedelta  # W / max_under_test
    critical: timedelta  # the longest rack path
    critical_rack: str  # which rack (and why) sets `critical`

    @property
    def value(self) -> timedelta:
        return max(self.capacity, self.critical)


def lower_bound(
    hall: Hall, max_under_test: int, *, faults: FaultSet | None = None, minutes: Mapping[str, float] = MINUTES
) -> Bound:
    """What no schedule within the blast radius can beat, given the hall's faults (an oracle that
    knows which device is faulty and tests it first), in the product's rules: a rack's collective
    runs on all its enrolled members once each passes alone; a device goes to repair at its
    `repair_after_failures`-th failure (R = 3); a repaired device passes its single-node tests again.
    It counts no backoff, no autopilot pass and no isolation beyond one round: those are the
    scheduler's choices. With S the single-node minutes of a class (one job), C its collective's,
    d(r) a requirement's, T the technician's wait (`REPAIR_AFTER`):

    * **critical path** `P` = the longest over racks holding a device to accept of: `S + C` (no
      fault); `S + d(r) + C` with a flaky member (its first attempt of r fails; r may be the
      collective); `2S + (R−1)·d(r) + T + C` with a hard fault in r (its first job — the planner
      runs every single-node requirement a device has not passed in one job —, R−1 reruns of r,
      the repair, its re-burn-in, the collective); `2S + 3C + T` with the collective-only fault
      (the failing collective, one isolation round, the repair, its re-burn-in, the collective).
    * **capacity** `W / max_under_test`, W the device-minutes those paths spend: every member of
      those racks `S + C`, plus a flaky member's `d(r)`, a hard fault's `(R−1)·d(r) + S`, and the
      collective-only rack's failed collective (`size × C`), a two-device isolation round (`2C`) and
      the re-burn-in `S`.

    `LB = max(P, W / max_under_test)`. The bad cable's rack is not to be accepted (its devices count
    as faulty), so it is in neither."""
    racks: dict[UUID, list[UUID]] = {}
    for device_id, rack in hall.rack_of.items():
        racks.setdefault(rack, []).append(device_id)
    faults = faults or FaultSet.of(hall.faults)
    retries = REPAIR_AFTER_FAILURES - 1
    repair_wait = REPAIR_AFTER.total_seconds() / 60
    work = 0.0
    critical, why = 0.0, ""
    for rack, members in racks.items():
        if rack == faults.cable_rack:
            continue
        rc = hall.devices[members[0]]
        single = sum(_minutes(rc, collective=False, minutes=minutes))
        (collective,) = _minutes(rc, collective=True, minutes=minutes)
        work += len(members) * (single + collective)
        path, reason = float(single + collective), "no fault"
        for device_id in members:
            if device_id in faults.hard:
                rerun = sum(minutes[r] for r in faults.hard[device_id])  # a rerun runs every failing target
                work += retries * rerun + single
                mine = 2 * single + retries * rerun + repair_wait + collective
                said = f"hard {'+'.join(faults.hard[device_id])}"
            elif device_id in faults.collective_only:
                work += len(members) * collective + 2 * collective + single
                mine, said = 2 * single + 3 * collective + repair_wait, "collective-only fault"
            elif device_id in faults.flaky:
                rerun = sum(minutes[r] for r in faults.flaky[device_id])
                work += rerun * (len(members) if rerun and set(faults.flaky[device_id]) & COLLECTIVES else 1)
                mine, said = single + rerun + collective, f"flaky {'+'.join(faults.flaky[device_id])}"
            else:
                continue
            if mine > path:
                path, reason = mine, said
        if path > critical:
            critical, why = path, f"{hall.labels[rack]} ({reason})"
    return Bound(timedelta(minutes=work / max_under_test), timedelta(minutes=critical), why)


def _minimum_hours(hall: Hall) -> float:
    """One run of every requirement on every device (a collective's hours: its members × its time)."""
    minutes = 0
    for rc in hall.devices.values():
        minutes += sum(m for _n, (c, _t, _u, m) in REQUIREMENTS.items() if c == rc)
    return minutes / 60


def _simulate(
    hall: Hall,
    *,
    max_under_test: int,
    wrong: bool,
    until: Callable[[datetime], bool],
    limit: timedelta,
    progress: Callable[[str], None],
) -> tuple[datetime, datetime, dict[str, Any]]:
    SiteAutopilot.objects.create(site=hall.site, enabled=True, max_under_test=max_under_test, backoff=BACKOFF)
    start = timezone.now() - timedelta(days=30)
    clock = start
    running: list[tuple[datetime, str, UUID]] = []  # (ends, job id) heap; the job runs when popped
    pending_jobs: dict[UUID, tuple[Job, list[UUID], datetime]] = {}
    entered_repair: dict[UUID, datetime] = {}
    stats: dict[str, Any] = {"device_minutes": 0.0, "max_under_test": 0, "passes": 0, "false_repairs": set()}
    good = {d for d in hall.devices if d not in hall.faults.with_a_fault()}
    # When each device first started a job, entered repair, was repaired, was accepted.
    timeline: dict[str, dict[UUID, datetime]] = {"first": {}, "repair": {}, "repaired": {}, "accepted": {}}
    stats["timeline"] = timeline

    def start_claimed(at: datetime) -> None:
        for job in jobs_claim(satellite=hall.satellite, capacity=10_000):
            members = list(JobDevice.objects.filter(job=job).values_list("device_id", flat=True))
            pending_jobs[job.id] = (job, members, at)
            minutes = sum(REQUIREMENTS[n][3] for n in job.requirement_names)
            stats["device_minutes"] += minutes * len(members)
            heapq.heappush(running, (at + timedelta(minutes=minutes), str(job.id), job.id))
            for member in members:
                timeline["first"].setdefault(member, at)

    while clock - start < limit:
        autopilot_pass(site=hall.site, actor=ACTOR, now=clock)
        stats["passes"] += 1
        start_claimed(clock)
        under = JobDevice.objects.filter(active=True, device__site=hall.site).count()
        stats["max_under_test"] = max(stats["max_under_test"], under)
        if until(clock):
            break
        # The next event: a job's end, a repair due, or a backoff ending.
        due = [at + REPAIR_AFTER for at in entered_repair.values()]
        nexts = [running[0][0]] if running else []
        nexts += [t for t in due if t > clock]
        nexts.append(clock + BACKOFF / 4)
        clock = max(clock, min(nexts))
        ended = False
        while running and running[0][0] <= clock:
            _ends, _key, job_id = heapq.heappop(running)
            job, members, began = pending_jobs.pop(job_id)
            _run_job(hall, job, members, began, wrong)
            ended = True
        if ended:
            _sweep(hall)
            for device_id in Device.objects.filter(site=hall.site, state=DeviceState.ACCEPTED).values_list(
                "id", flat=True
            ):
                timeline["accepted"].setdefault(device_id, clock)
        for device_id in Device.objects.filter(site=hall.site, state=DeviceState.NEEDS_REPAIR).values_list(
            "id", flat=True
        ):
            if device_id not in entered_repair:
                entered_repair[device_id] = clock
                timeline["repair"][device_id] = clock
                if device_id in good:
                    stats["false_repairs"].add(device_id)
        for device_id, at in sorted(entered_repair.items(), key=lambda kv: kv[1]):
            if at + REPAIR_AFTER > clock or wrong:
                continue
            if JobDevice.objects.filter(device_id=device_id, active=True).exists():
                continue
            if JobDevice.objects.filter(active=True, device__site=hall.site).count() >= max_under_test:
                break  # the technician's re-burn-in waits for room within the blast radius
            hall.faults.repaired.add(device_id)
            repair_record(
                device_id=device_id, summary="bench technician", parts=[], rerun=RepairRerun.ALL, actor="bench"
            )
            del entered_repair[device_id]
            timeline["repaired"][device_id] = clock
            start_claimed(clock)
        if stats["passes"] % 25 == 0:
            accepted = Device.objects.filter(site=hall.site, state=DeviceState.ACCEPTED).count()
            progress(f"bring-up: {(clock - start).total_seconds() / 3600:.1f} h simulated, {accepted} accepted")
    return start, clock, stats


def _where(
    hall: Hall, start: datetime, end: datetime, stats: dict[str, Any], target: set[UUID], max_under_test: int
) -> dict[str, Any]:
    """Where the time went: when the last device started its first job (every fault can be seen only
    after that), the slots' use over the run, and the rack accepted last with its repaired device's
    story (first job, into repair, repaired, accepted), in hours from the start."""
    timeline = stats["timeline"]

    def h(at: datetime | None) -> float | None:
        return round((at - start).total_seconds() / 3600, 2) if at is not None else None

    span_min = max(1.0, (end - start).total_seconds() / 60)
    accepted = {d: at for d, at in timeline["accepted"].items() if d in target}
    last = max(accepted, key=lambda d: accepted[d]) if accepted else None
    where: dict[str, Any] = {
        "last_first_job_h": h(max(timeline["first"].values(), default=None)),
        "slot_use": round(stats["device_minutes"] / (max_under_test * span_min), 3),
        "last_entered_repair_h": h(max(timeline["repair"].values(), default=None)),
    }
    if last is not None:
        rack = hall.rack_of[last]
        members = [d for d, r in hall.rack_of.items() if r == rack]
        story = {}
        for device_id in members:
            if device_id in timeline["repair"]:
                story = {
                    "first_job_h": h(timeline["first"].get(device_id)),
                    "entered_repair_h": h(timeline["repair"].get(device_id)),
                    "repaired_h": h(timeline["repaired"].get(device_id)),
                }
        where["last_rack"] = {"label": hall.labels[rack], "accepted_h": h(accepted[last]), "repaired_member": story}
    return where


def bringup_measure(*, scale: float, progress: Callable[[str], None], seed: int = 42) -> tuple[BringUp, WrongPolicy]:
    """The hall's bring-up (its faults drawn from `seed`) and the wrong-threshold hall's."""
    import time

    began = time.perf_counter()
    # The sweeps issue certificates: a throwaway signing key for the throwaway database.
    settings.CERTIFICATE_KEY_FILE = str(Path(tempfile.mkdtemp(prefix="bench-key-")) / "key.pem")
    signing_key_init()
    racks = max(4, round(RACKS * scale))
    hall = _hall("bringup", racks=racks, domains=DOMAINS, seed=seed)
    good = {d for d in hall.devices if d not in hall.faults.with_a_fault()}
    blocked = {d for d, rack in hall.rack_of.items() if rack == hall.faults.cable_rack}
    target = good - blocked  # a bad cable's rack cannot be accepted until the cable is fixed
    progress(
        f"bring-up: {len(hall.devices)} devices, {len(hall.faults.hard)} hard faults, {len(hall.faults.flaky)} flaky"
    )

    def done(_clock: datetime) -> bool:
        accepted = set(Device.objects.filter(id__in=target, state=DeviceState.ACCEPTED).values_list("id", flat=True))
        return accepted == target

    start, end, stats = _simulate(
        hall, max_under_test=MAX_UNDER_TEST, wrong=False, until=done, limit=timedelta(days=10), progress=progress
    )
    finished = done(end)
    faulty_accepted = Device.objects.filter(
        id__in=hall.faults.with_a_fault() - hall.faults.repaired, state=DeviceState.ACCEPTED
    ).count()
    faulty_accepted += Device.objects.filter(id__in=blocked, state=DeviceState.ACCEPTED).count()
    actions = dict(
        AutopilotAction.objects.filter(site=hall.site).values_list("kind").annotate(n=Count("id")).order_by()
    )
    bound = lower_bound(hall, MAX_UNDER_TEST)
    result = BringUp(
        devices=len(hall.devices),
        max_under_test=MAX_UNDER_TEST,
        lower_bound_h=bound.value.total_seconds() / 3600,
        capacity_bound_h=bound.capacity.total_seconds() / 3600,
        critical_path_h=bound.critical.total_seconds() / 3600,
        critical_rack=bound.critical_rack,
        where=_where(hall, start, end, stats, target, MAX_UNDER_TEST),
        time_h=(end - start).total_seconds() / 3600 if finished else None,
        test_hours=stats["device_minutes"] / 60,
        minimum_hours=_minimum_hours(hall),
        escapes=faulty_accepted,
        false_repairs=len(stats["false_repairs"]),
        good_devices=len(good),
        max_under_test_seen=stats["max_under_test"],
        accepted=Device.objects.filter(site=hall.site, state=DeviceState.ACCEPTED).count(),
        passes=stats["passes"],
        actions=actions,
        wall_s=time.perf_counter() - began,
    )
    progress("bring-up: the wrong-threshold hall")
    # More devices than the blast radius: a second wave exists that the open breaker must hold.
    wrong = _hall("wrong", racks=max(12, round(16 * scale)), domains=0, seed=7, wrong=True)
    h200 = [d for d, rc in wrong.devices.items() if rc == H200]
    seen: dict[str, datetime] = {}

    def tripped(clock: datetime) -> bool:
        """An hour of passes after the breaker opened (they must dispatch nothing of the class)."""
        if "open" not in seen and Breaker.objects.filter(site=wrong.site, resource_class=H200).exists():
            seen["open"] = clock
        return "open" in seen and clock - seen["open"] >= timedelta(hours=1)

    _simulate(
        wrong, max_under_test=MAX_UNDER_TEST, wrong=True, until=tripped, limit=timedelta(days=2), progress=progress
    )
    breaker = Breaker.objects.filter(site=wrong.site, resource_class=H200).first()
    after = 0
    if breaker is not None:
        after = Job.objects.filter(
            site=wrong.site, reason=JobReason.DISPATCH, created_at__gt=breaker.opened_at, requested_by=ACTOR
        ).count()
    sent = Device.objects.filter(id__in=h200, state=DeviceState.NEEDS_REPAIR).count()
    wrong_result = WrongPolicy(
        devices=len(h200),
        sent_to_repair=sent,
        breaker_limit=breaker_limit(len(h200), share=BREAKER_SHARE, minimum=BREAKER_MINIMUM),
        breaker_minimum=BREAKER_MINIMUM,
        breaker_opened=breaker is not None,
        dispatched_after_open=after,
    )
    return result, wrong_result


def bringup_figures(run: BringUp, wrong: WrongPolicy) -> dict[str, Any]:
    return {
        "bringup_devices": run.devices,
        "bringup_max_under_test": run.max_under_test,
        "bringup_lower_bound_h": round(run.lower_bound_h, 2),
        "bringup_capacity_bound_h": round(run.capacity_bound_h, 2),
        "bringup_critical_path_h": round(run.critical_path_h, 2),
        "bringup_critical_rack": run.critical_rack,
        "bringup_time_h": round(run.time_h, 2) if run.time_h is not None else None,
        "bringup_time_vs_lower_bound": round(run.time_vs_lower_bound, 3) if run.time_vs_lower_bound else None,
        "bringup_where": run.where,
        "bringup_test_hours_vs_minimum": round(run.test_hours_vs_minimum, 3),
        "bringup_escapes": run.escapes,
        "bringup_false_repairs": run.false_repairs,
        "bringup_false_repairs_share": round(run.false_repairs / max(1, run.good_devices), 4),
        "bringup_max_under_test_seen": run.max_under_test_seen,
        "bringup_passes": run.passes,
        "bringup_actions": run.actions,
        "bringup_wall_s": round(run.wall_s, 1),
        "bringup_wrong_policy_devices": wrong.devices,
        "bringup_wrong_policy_devices_sent_to_repair": wrong.sent_to_repair,
        "bringup_wrong_policy_breaker_limit": wrong.breaker_limit,
        "bringup_wrong_policy_breaker_minimum": wrong.breaker_minimum,
        "bringup_wrong_policy_breaker_opened": wrong.breaker_opened,
        "bringup_wrong_policy_dispatched_after_open": wrong.dispatched_after_open,
    }
