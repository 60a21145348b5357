"""Races on real PostgreSQL, one world through three rounds (each started together at a barrier):

1. 16 concurrent dispatches over overlapping selections (through the API);
2. 8 agents of the satellite claiming at once (through the API);
3. a storm: 4 free-running reconcile sweepers with different page sizes, while 4 writers report
   new executions and their evaluations and 4 more dispatches arrive; then every sweeper runs one
   more sweep together.

Invariants after each round: at most one active job per device (and every selected device held),
no job handed to two agents, and the projection the concurrent sweeps leave equals both a
sequential sweep from scratch and an independent recomputation with plain ORM reads.
The rounds add to the races of tests/burnin (two claimers, 16 dispatches, interleaved sweeps).
"""

from __future__ import annotations

import sys
import threading
from collections import Counter
from collections.abc import Callable

import pytest
from django.db import connections

from fleet.burnin.models import PolicyProgress
from fleet.jobs.models import Job, JobDevice
from fleet_rules.vocabulary import JobStatus, WorkflowName
from tests.burnin.sweeps import expected_projection, projection, sweep_service
from tests.burnin.test_reconcile import evaluate
from tests.schema_validation import generated_schema

pytestmark = pytest.mark.slow

DEVICES = 24


def run_together(workers: list[Callable[[], object]], timeout: float = 120) -> list[object]:
    """Start every worker at one barrier; their results in order; any exception fails the test."""
    start = threading.Barrier(len(workers))
    results: list[object] = [None] * len(workers)
    errors: list[BaseException] = []

    def run(i: int) -> None:
        try:
            start.wait(30)
            results[i] = workers[i]()
        except BaseException as exc:
            errors.append(exc)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(workers))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout)
    assert not any(t.is_alive() for t in threads), "a worker hung"
    if errors:
        raise errors[0]  # with its traceback
    return results


def assert_one_active_job_per_device() -> Counter:
    held = Counter(JobDevice.objects.filter(active=True).values_list("device_id", flat=True))
    assert held and max(held.values()) == 1, held.most_common(3)
    return held


def assert_projection_is_a_sequential_recompute(site, satellite, policy) -> dict:
    concurrent = projection()
    independent, targets = expected_projection(site, satellite, "gpu.h200.8x", policy)
    PolicyProgress.objects.all().delete()
    sweep_service("lon-1", "sat-a", "gpu.h200.8x")
    assert projection() == concurrent == independent
    assert len(concurrent) == targets == DEVICES
    return concurrent


@pytest.mark.django_db(transaction=True)
def test_dispatches_claims_sweeps_and_evaluation_writes_racing_keep_every_invariant(fleet, bearer):
    site = fleet.site("lon-1")
    satellite = fleet.satellite(site, "sat-a", workflows=list(WorkflowName.values))
    devices = [fleet.device(satellite, hostname=f"a01-n{i:02d}") for i in range(DEVICES)]
    policy = fleet.policy("gpu.h200.8x")
    diag = fleet.requirement(policy, "gpu-diag")
    fleet.profile("gpu.h200.8x", "dcgm-diag", {"level": 3})
    for device in devices:
        evaluate(fleet.execution(diag, device=device), diag, site, passed=False)
    sweep_service("lon-1", "sat-a", "gpu.h200.8x")
    dispatch_url = f"/api/v1/burn-in/sites/{site.id}/rerun-plans/dispatch/"
    generated_schema()  # the clients validate against it; drf-spectacular cannot generate it from 16 threads at once

    # 1. 16 dispatches, each of 8 devices, every device in several selections.
    operators = [bearer(["job:create"], name=f"op-{i}") for i in range(16)]
    selections = [[str(devices[(3 * i + k) % DEVICES].id) for k in range(8)] for i in range(16)]

    def dispatcher(i: int) -> Callable[[], dict]:
        def go() -> dict:
            response = operators[i].post(dispatch_url, {"device_ids": selections[i]}, format="json")
            assert response.status_code == 200, response.content
            return response.json()

        return go

    bodies = run_together([dispatcher(i) for i in range(16)])
    held = assert_one_active_job_per_device()
    assert sorted(map(str, held)) == sorted(str(d.id) for d in devices)
    created = [job for body in bodies for job in body["created_jobs"]]
    assert len(created) == DEVICES == Job.objects.count()
    for body, selection in zip(bodies, selections, strict=True):
        answered = [d for j in body["created_jobs"] for d in j["device_ids"]]
        answered += [d for g in body["skips"] for d in g["device_ids"]]
        assert sorted(answered) == sorted(selection)
        assert {g["reason"] for g in body["skips"]} <= {"already_dispatched"}

    # 2. 8 agents claim at once, 4 jobs each asked: 24 jobs, each handed out exactly once.
    agents = [bearer(["job:run"], satellite=satellite) for _ in range(8)]

    def claimer(i: int) -> Callable[[], list[str]]:
        def go() -> list[str]:
            body = {"site_slug": "lon-1", "satellite_name": "sat-a", "capacity": 4}
            response = agents[i].post("/api/v1/jobs/claim/", body, format="json")
            assert response.status_code == 200, response.content
            return [job["id"] for job in response.json()["jobs"]]

        return go

    claims = run_together([claimer(i) for i in range(8)])
    handed = Counter(job for claim in claims for job in claim)
    assert len(handed) == DEVICES and max(handed.values()) == 1, handed.most_common(3)
    assert Job.objects.filter(status=JobStatus.RUNNING).count() == DEVICES

    # 3. The storm: sweeps with every page size against new evidence and more dispatches.
    writes_done = threading.Event()
    final = threading.Barrier(4)
    sweeps_run = Counter()

    def sweeper(limit: int) -> Callable[[], None]:
        def go() -> None:
            while not writes_done.is_set():
                sweep_service("lon-1", "sat-a", "gpu.h200.8x", limit=limit)
                sweeps_run[limit] += 1
            final.wait(60)  # one more sweep each, all at once, after the last write
            sweep_service("lon-1", "sat-a", "gpu.h200.8x", limit=limit)
            sweeps_run[limit] += 1

        return go

    def writer(w: int) -> Callable[[], None]:
        def go() -> None:
            for round_ in range(3):
                for device in devices[w::4]:
                    execution = fleet.execution(diag, device=device)
                    evaluate(execution, diag, site, passed=(round_ + w) % 2 == 0)

        return go

    def late_dispatcher(i: int) -> Callable[[], dict]:
        return dispatcher(i)

    def writers_then_signal(workers: list[Callable[[], None]]) -> Callable[[], None]:
        def go() -> None:
            try:
                run_together(workers)
            finally:
                writes_done.set()

        return go

    run_together(
        [
            *(sweeper(limit) for limit in (1, 3, 5, 7)),
            writers_then_signal([*(writer(w) for w in range(4)), *(late_dispatcher(i) for i in range(4))]),
        ],
        timeout=240,
    )
    assert all(count >= 2 for count in sweeps_run.values()), sweeps_run
    assert_one_active_job_per_device()
    assert Job.objects.count() == DEVICES  # the late dispatches found every device already covered
    rows = assert_projection_is_a_sequential_recompute(site, satellite, policy)
    print(  # noqa: T201 - the figures the reliability note quotes
        f"\nraces: 16 dispatches -> {len(created)} jobs, 8 claims -> {len(handed)} jobs each once, "
        f"storm: {sum(sweeps_run.values())} sweeps (limits 1/3/5/7) with {4 * 3 * DEVICES // 4} evaluation writes "
        f"and 4 dispatches; projection of {len(rows)} rows equals a sequential recompute",
        file=sys.stderr,
    )
