"""The benchmark fleet, built with bulk inserts.

Setup is not what we measure, and reporting tens of thousands of executions one at a time
through the service would take longer than the whole benchmark. The shape is what an operator
of one busy satellite would see: one resource class, six single-node requirements plus a rack
acceptance requirement, racks of eight devices, and a latest execution for most targets
(some still running, some errored, a few re-run).
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any
from uuid import UUID, uuid4

from django.db import connection
from django.utils import timezone
from psycopg.types.json import Jsonb

from fleet.burnin.models import TestExecution
from fleet.inventory.models import Device, Satellite, Site, Topology, TopologyMembership
from fleet.policies.models import (
    RACK_ACCEPTANCE,
    AcceptancePolicy,
    ParameterProfile,
    Requirement,
    RequirementScope,
    ThresholdRule,
)
from fleet.policies.selectors import load_resolutions
from fleet_rules.vocabulary import DeviceState, ExecutionStatus, TopologyUnit, WorkflowName

RESOURCE_CLASS = "gpu.h200.8x"
RACK_SIZE = 8
DEVICES_PER_SCALE = 5_000

# (name, test, metric, comparator, threshold, a passing value, a failing value)
SINGLE_NODE = (
    ("cpu-stress", "stress-ng", "cpu_errors", "eq", 0, 0, 3),
    ("gpu-diag", "dcgm-diag", "diag_failed_tests", "eq", 0, 0, 2),
    ("gpu-memory-bandwidth", "nvbandwidth", "d2d_bandwidth_gbps", "gte", 3000, 3350.5, 2710.0),
    ("nccl-intra-node", "nccl-all-reduce", "busbw_gbps", "gte", 400, 452.1, 311.7),
    ("nvme-throughput", "fio", "read_mbps", "gte", 6000, 6830.0, 4100.0),
    ("pcie-bandwidth", "nvbandwidth-h2d", "h2d_bandwidth_gbps", "gte", 50, 54.2, 31.9),
)
RACK = ("rack-nccl", "nccl-all-reduce-multi", "busbw_gbps", "gte", 350, 371.0, 240.3)

# Shares of targets, chosen to look like a fleet mid burn-in.
HAS_EXECUTION = 0.92
RERUN = 0.10  # targets with an older execution behind the latest one
RUNNING = 0.02
ERRORED = 0.03
FAILING = 0.10
EVALUATED = 0.95  # finished latest executions whose evaluation is materialised


@dataclass(frozen=True)
class RequirementSpec:
    requirement: Requirement
    metric: str
    comparator: str
    threshold: float
    passing_value: float
    failing_value: float


@dataclass(frozen=True)
class LatestExecution:
    """A target's latest execution, with the verdict its metrics imply."""

    id: UUID
    spec: RequirementSpec
    status: str
    updated_at: datetime
    passes: bool


@dataclass(frozen=True)
class Fleet:
    site: Site
    satellite: Satellite
    policy: AcceptancePolicy
    specs: tuple[RequirementSpec, ...]  # the six single-node requirements, then the rack one
    device_ids: tuple[UUID, ...]
    topology_ids: tuple[UUID, ...]
    latest: tuple[LatestExecution, ...]
    keys: dict[UUID, str]  # requirement id → current evaluation_source_key

    @property
    def target_count(self) -> int:
        return (len(self.specs) - 1) * len(self.device_ids) + len(self.topology_ids)

    def finished_single_node(self) -> list[LatestExecution]:
        return [
            e
            for e in self.latest
            if e.status != ExecutionStatus.RUNNING and e.spec.requirement.scope == RequirementScope.SINGLE_NODE
        ]


def evaluation_payload(execution: LatestExecution) -> dict[str, Any]:
    """What the agent's evaluator would post for this execution."""
    if execution.status == ExecutionStatus.ERRORED:
        return {"passed": False, "reason": "runner crashed", "metric_evaluations": {}}
    spec = execution.spec
    value = spec.passing_value if execution.passes else spec.failing_value
    check = {"passed": execution.passes, "threshold": spec.threshold, "comparator": spec.comparator}
    return {
        "passed": execution.passes,
        "reason": None if execution.passes else f"{spec.metric}: {value} is not {spec.comparator} {spec.threshold}",
        "metric_evaluations": {
            spec.metric: {"passed": execution.passes, "value_evaluation": check, "statistic_evaluations": None}
        },
    }


def _policy() -> tuple[Site, Satellite, AcceptancePolicy, tuple[RequirementSpec, ...]]:
    site = Site.objects.create(slug="bench", name="Benchmark site")
    workflows = [{"name": w, "version": "1"} for w in WorkflowName.values]
    satellite = Satellite.objects.create(site=site, name="bench-sat", advertised_workflows=workflows)
    policy = AcceptancePolicy.objects.create(resource_class=RESOURCE_CLASS, version=1)
    specs = []
    for index, (name, test, metric, comparator, threshold, good, bad) in enumerate((*SINGLE_NODE, RACK)):
        multi_node = index == len(SINGLE_NODE)
        requirement = Requirement.objects.create(
            policy=policy,
            name=name,
            gate=RACK_ACCEPTANCE if multi_node else "burn-in",
            scope=RequirementScope.MULTI_NODE if multi_node else RequirementScope.SINGLE_NODE,
            unit=TopologyUnit.RACK if multi_node else None,
            test=test,
            parameter_constraints={"duration_s": {"gte": 3600}},
        )
        ThresholdRule.objects.create(requirement=requirement, metric=metric, comparator=comparator, threshold=threshold)
        ParameterProfile.objects.create(resource_class=RESOURCE_CLASS, test=test, parameters={"duration_s": 3600})
        specs.append(RequirementSpec(requirement, metric, comparator, threshold, good, bad))
    return site, satellite, policy, tuple(specs)


def _inventory(site: Site, satellite: Satellite, devices: int) -> tuple[list[UUID], list[UUID]]:
    now = timezone.now()
    racks = Topology.objects.bulk_create(
        Topology(site=site, satellite=satellite, unit=TopologyUnit.RACK, label=f"rack-{r:04d}")
        for r in range((devices + RACK_SIZE - 1) // RACK_SIZE)
    )
    created = Device.objects.bulk_create(
        (
            Device(
                site=site,
                satellite=satellite,
                hostname=f"node-{i:05d}",
                serial=f"SN{i:07d}",
                resource_class=RESOURCE_CLASS,
                state=DeviceState.BURN_IN,
                enrolled_at=now,
            )
            for i in range(devices)
        ),
        batch_size=2000,
    )
    TopologyMembership.objects.bulk_create(
        (
            TopologyMembership(device=d, topology=racks[i // RACK_SIZE], unit=TopologyUnit.RACK)
            for i, d in enumerate(created)
        ),
        batch_size=2000,
    )
    return [d.id for d in created], [t.id for t in racks]


def _executions(
    rng: random.Random, site: Site, specs: tuple[RequirementSpec, ...], device_ids: list[UUID], rack_ids: list[UUID]
) -> list[LatestExecution]:
    """Executions for most targets (a few with an older run behind), in one bulk insert."""
    started = timezone.now() - timedelta(days=3)
    rows: list[TestExecution] = []
    latest: list[LatestExecution] = []
    clock = 0

    def add(spec: RequirementSpec, device_id: UUID | None, topology_id: UUID | None, status: str, passes: bool):
        nonlocal clock
        clock += 1
        created = started + timedelta(seconds=clock)
        value = spec.passing_value if passes else spec.failing_value
        row = TestExecution(
            id=uuid4(),
            site=site,
            requirement=spec.requirement,
            test=spec.requirement.test,
            device_id=device_id,
            topology_id=topology_id,
            status=status,
            parameters={"duration_s": 3600},
            metrics={} if status != ExecutionStatus.COMPLETED else {spec.metric: {"value": value, "unit": "n"}},
            error="runner crashed" if status == ExecutionStatus.ERRORED else "",
            started_at=created,
            finished_at=None if status == ExecutionStatus.RUNNING else created + timedelta(minutes=61),
            reported_by="bench",
            created_at=created,
            updated_at=created + timedelta(minutes=61),
        )
        rows.append(row)
        return row

    targets = [(spec, d, None) for spec in specs[:-1] for d in device_ids] + [(specs[-1], None, t) for t in rack_ids]
    for spec, device_id, topology_id in targets:
        if rng.random() >= HAS_EXECUTION:
            continue
        if rng.random() < RERUN:
            add(spec, device_id, topology_id, ExecutionStatus.COMPLETED, passes=False)
        roll = rng.random()
        status = (
            ExecutionStatus.RUNNING
            if roll < RUNNING
            else ExecutionStatus.ERRORED
            if roll < RUNNING + ERRORED
            else ExecutionStatus.COMPLETED
        )
        passes = status == ExecutionStatus.COMPLETED and rng.random() >= FAILING
        row = add(spec, device_id, topology_id, status, passes)
        latest.append(LatestExecution(row.id, spec, status, row.updated_at, passes))
    # The older run of a target was created first (the clock only moves forward), so "latest"
    # above is what the service's latest-execution query finds.
    TestExecution.objects.bulk_create(rows, batch_size=2000)
    return latest


def fleet_build(*, scale: float, seed: int = 7) -> Fleet:
    rng = random.Random(seed)
    site, satellite, policy, specs = _policy()
    device_ids, rack_ids = _inventory(site, satellite, max(RACK_SIZE, int(DEVICES_PER_SCALE * scale)))
    latest = _executions(rng, site, specs, device_ids, rack_ids)
    resolutions = load_resolutions((s.requirement.id, site.id) for s in specs)
    keys = {s.requirement.id: resolutions[(s.requirement.id, site.id)].key for s in specs}
    return Fleet(site, satellite, policy, specs, tuple(device_ids), tuple(rack_ids), tuple(latest), keys)


_INSERT_EVALUATIONS = """
INSERT INTO burnin_evaluationresult
    (execution_id, passed, reason, metric_evaluations, evaluation_source_key, execution_updated_at, materialised_at)
SELECT * FROM unnest(%s::uuid[], %s::boolean[], %s::text[], %s::jsonb[], %s::varchar[], %s::timestamptz[],
                     %s::timestamptz[])
"""


def evaluations_materialise(fleet: Fleet, *, seed: int = 11) -> int:
    """Replace all evaluations with current ones for most finished latest executions (the rest
    stay unevaluated, so reconcile defers them). Returns how many were written."""
    rng = random.Random(seed)
    chosen = [e for e in fleet.latest if e.status != ExecutionStatus.RUNNING and rng.random() < EVALUATED]
    payloads = [evaluation_payload(e) for e in chosen]
    now = timezone.now()
    with connection.cursor() as cursor:
        # A TRUNCATE fires no trigger: forgetting the work list's keys makes the next feed read
        # re-list what is pending at the site.
        cursor.execute("TRUNCATE burnin_evaluationresult, burnin_pendingevaluationkey")
        cursor.execute(
            _INSERT_EVALUATIONS,
            [
                [e.id for e in chosen],
                [p["passed"] for p in payloads],
                [p["reason"] for p in payloads],
                [Jsonb(p["metric_evaluations"]) for p in payloads],
                [fleet.keys[e.spec.requirement.id] for e in chosen],
                [e.updated_at for e in chosen],
                [now] * len(chosen),
            ],
        )
    return len(chosen)
