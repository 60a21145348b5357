"""Culprit isolation on PostgreSQL: preview, dispatch, rounds through the Job path, the culprit
recorded as a diagnosis, the rack's projection row untouched, constant queries."""

from __future__ import annotations

from uuid import uuid4

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from fleet.burnin.diagnosis.isolation import isolation_advance, isolation_dispatch, isolation_preview
from fleet.burnin.executions import ExecutionReport, execution_report
from fleet.burnin.models import DeviceDiagnosis, IsolationPlan, PolicyProgress, TestExecution
from fleet.events.models import Event
from fleet.inventory.models import Device
from fleet.jobs.models import Job, JobDevice
from fleet.jobs.services import job_finish, jobs_claim
from fleet.lifecycle.models import DeviceStateChange
from fleet_rules.vocabulary import DeviceState, EventType, IsolationStatus, JobReason, JobStatus, WorkflowName
from tests.burnin.sweeps import sweep_service
from tests.burnin.test_reconcile import evaluate

NCCL = [{"metric": "busbw_gbps", "comparator": "gte", "threshold": 340}]
GOOD = {"busbw_gbps": {"value": 372.0}}
BAD = {"busbw_gbps": {"value": 262.0}}


class Rack:
    def __init__(self, fleet, *, size=8, bad=5, other_racks=0):
        self.fleet = fleet
        self.site = fleet.site("lon-1")
        self.satellite = fleet.satellite(self.site, "sat-a", workflows=list(WorkflowName.values))
        policy = fleet.policy("gpu.h200.8x")
        self.diag = fleet.requirement(policy, "gpu-diag")
        self.nccl = fleet.requirement(
            policy, "rack-nccl", scope="multi_node", unit="rack", test="nccl-all-reduce-multinode", thresholds=NCCL
        )
        fleet.profile("gpu.h200.8x", "nccl-all-reduce-multinode", {"iters": 20})
        self.rack = fleet.topology(self.satellite, "rack", "rack-a01")
        self.devices = [
            fleet.device(self.satellite, hostname=f"a01-n{i:02d}", topologies=[self.rack]) for i in range(size)
        ]
        self.bad = self.devices[bad]
        for r in range(other_racks):  # the rest of the fleet: more racks, more devices
            rack = fleet.topology(self.satellite, "rack", f"rack-b{r:02d}")
            for i in range(8):
                fleet.device(self.satellite, hostname=f"b{r:02d}-n{i:02d}", topologies=[rack])
        for device in self.devices:
            evaluate(fleet.execution(self.diag, device=device), self.diag, self.site)
        self.cohort_run = fleet.execution(self.nccl, topology=self.rack, metrics=BAD)
        evaluate(self.cohort_run, self.nccl, self.site, passed=False)
        sweep_service("lon-1", "sat-a", "gpu.h200.8x")

    def rack_row(self):
        return PolicyProgress.objects.get(requirement=self.nccl, topology=self.rack)

    def run_round(self):
        """What the agent does: claim the round's jobs, report each collective (failing iff the bad
        device is in it), finish the job, evaluate."""
        jobs = jobs_claim(satellite=self.satellite, capacity=10)
        held = [
            d
            for job in jobs
            for d in JobDevice.objects.filter(job=job, active=True).values_list("device_id", flat=True)
        ]
        assert len(held) == len(set(held)), "a device in two active jobs"
        for job in jobs:
            members = set(JobDevice.objects.filter(job=job).values_list("device_id", flat=True))
            metrics = BAD if self.bad.id in members else GOOD
            execution = execution_report(
                execution_id=uuid4(),
                report=ExecutionReport(
                    requirement="rack-nccl",
                    test=None,
                    device_id=None,
                    topology_id=self.rack.id,
                    job_id=job.id,
                    status="completed",
                    parameters={},
                    metrics=metrics,
                    error="",
                    started_at=None,
                    finished_at=None,
                ),
                actor=None,
                reported_by="test",
            ).execution
            job_finish(job_id=job.id, outcome=JobStatus.SUCCEEDED)
            evaluate(execution, self.nccl, self.site, passed=metrics is GOOD)
        return jobs


def test_the_preview_plans_two_halves_and_creates_nothing(fleet):
    rack = Rack(fleet)
    preview = isolation_preview(site=rack.site, topology_id=rack.rack.id, requirement_name="rack-nccl")
    assert preview.max_rounds == 4
    assert [len(s.devices) for s in preview.first_round.subsets] == [4, 4]
    assert Job.objects.count() == 0 and IsolationPlan.objects.count() == 0


def test_a_rack_of_8_with_one_faulty_device_is_isolated_in_3_rounds(fleet):
    rack = Rack(fleet)
    before = rack.rack_row()
    plan = isolation_dispatch(site=rack.site, topology_id=rack.rack.id, requirement_name="rack-nccl", requested_by="t")
    rounds = 0
    while plan.status == IsolationStatus.RUNNING:
        jobs = rack.run_round()
        assert jobs and all(j.reason == JobReason.DIAGNOSIS for j in jobs)
        assert all(
            j.workflow_name == WorkflowName.MULTI_NODE_COLLECTIVE and j.topology_id == rack.rack.id for j in jobs
        )
        rounds += 1
        plan = isolation_advance(site=rack.site, plan_id=plan.id, requested_by="t")
        assert rounds <= plan.max_rounds
    assert plan.status == IsolationStatus.FOUND and rounds == 3
    assert plan.state["culprits"] == [str(rack.bad.id)]
    (diagnosis,) = DeviceDiagnosis.objects.all()
    assert diagnosis.device == rack.bad and "rack-nccl" in diagnosis.finding and "3 rounds" in diagnosis.finding
    # Named by isolation, the culprit goes to repair (and nothing else moves).
    (change,) = DeviceStateChange.objects.all()
    assert (change.device_id, change.to_state, change.cause) == (rack.bad.id, "needs_repair", "isolation")
    assert Device.objects.get(id=rack.bad.id).state == DeviceState.NEEDS_REPAIR
    # Both are events: the culprit found, and its move to repair (fleet.events).
    found = Event.objects.get(type=EventType.ISOLATION_CULPRIT_FOUND)
    assert found.data["device_id"] == str(rack.bad.id) and found.data["plan_id"] == str(plan.id)
    assert found.data["rounds"] == 3 and found.data["links"]["isolation"].endswith(f"/isolation/{plan.id}/")
    assert Event.objects.get(type=EventType.DEVICE_NEEDS_REPAIR).data["cause"] == "isolation"
    # Diagnostic executions never decide the rack's verdict.
    assert TestExecution.objects.filter(diagnostic=True).count() == 6
    sweep_service("lon-1", "sat-a", "gpu.h200.8x")
    after = rack.rack_row()
    assert (
        (after.verdict, after.execution_id) == ("failed", rack.cohort_run.id) == (before.verdict, before.execution_id)
    )


def test_advancing_a_round_that_is_still_out_changes_nothing(fleet):
    rack = Rack(fleet)
    plan = isolation_dispatch(site=rack.site, topology_id=rack.rack.id, requirement_name="rack-nccl", requested_by="t")
    again = isolation_advance(site=rack.site, plan_id=plan.id, requested_by="t")
    assert len(again.rounds) == 1 and again.status == IsolationStatus.RUNNING
    assert Job.objects.count() == 2


def test_one_plan_per_cohort_and_one_active_job_per_device(fleet, bearer):
    rack = Rack(fleet)
    client = bearer(["job:create", "fleet:read"])
    url = f"/api/v1/burn-in/sites/{rack.site.id}/isolation-plans/dispatch/"
    body = {"topology_id": str(rack.rack.id), "requirement": "rack-nccl"}
    first = client.post(url, body, format="json")
    assert first.status_code == 200, first.content
    assert [len(s["devices"]) for s in first.json()["rounds"][0]["subsets"]] == [4, 4]
    second = client.post(url, body, format="json")
    assert second.status_code == 409 and IsolationPlan.objects.count() == 1 and Job.objects.count() == 2


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"topology_id": "00000000-0000-4000-8000-000000000000", "requirement": "rack-nccl"}, "topology_id"),
        ({"requirement": "rack-nccl"}, "topology_id"),
        ({"topology_id": None, "requirement": "x"}, "topology_id"),
    ],
)
def test_bad_requests_are_400_and_write_nothing(fleet, bearer, body, field):
    rack = Rack(fleet)
    response = bearer(["job:create"]).post(
        f"/api/v1/burn-in/sites/{rack.site.id}/isolation-plans/dispatch/", body, format="json"
    )
    assert response.status_code == 400, response.content
    assert field in [e["field"] for e in response.json()["field_errors"]]
    assert IsolationPlan.objects.count() == 0 and Job.objects.count() == 0


def test_a_rack_that_did_not_fail_is_not_isolated(fleet, bearer):
    rack = Rack(fleet)
    evaluate(fleet.execution(rack.nccl, topology=rack.rack, metrics=GOOD), rack.nccl, rack.site)
    sweep_service("lon-1", "sat-a", "gpu.h200.8x")
    client = bearer(["job:create"])
    response = client.post(
        f"/api/v1/burn-in/sites/{rack.site.id}/isolation-plans/",
        {"topology_id": str(rack.rack.id), "requirement": "rack-nccl"},
        format="json",
    )
    assert response.status_code == 400
    assert "has not failed" in str(response.json()["field_errors"][0])
    wrong = client.post(
        f"/api/v1/burn-in/sites/{rack.site.id}/isolation-plans/",
        {"topology_id": str(rack.rack.id), "requirement": "gpu-diag"},
        format="json",
    )
    assert wrong.status_code == 400 and wrong.json()["field_errors"][0]["field"] == "requirement"


def test_the_plan_and_the_diagnosis_are_readable_through_the_api(fleet, bearer):
    rack = Rack(fleet)
    plan = isolation_dispatch(site=rack.site, topology_id=rack.rack.id, requirement_name="rack-nccl", requested_by="t")
    client = bearer(["fleet:read", "job:create"])
    while plan.status == IsolationStatus.RUNNING:
        rack.run_round()
        response = client.post(f"/api/v1/burn-in/sites/{rack.site.id}/isolation-plans/{plan.id}/advance/")
        assert response.status_code == 200, response.content
        plan = IsolationPlan.objects.get(id=plan.id)
    body = client.get(f"/api/v1/burn-in/sites/{rack.site.id}/isolation-plans/{plan.id}/").json()
    assert body["status"] == "found" and [c["hostname"] for c in body["culprits"]] == ["a01-n05"]
    first = body["rounds"][0]["subsets"]
    assert [s["verdict"] for s in first] == [
        "failed" if "a01-n05" in [d["hostname"] for d in s["devices"]] else "passed" for s in first
    ]
    assert sorted(s["verdict"] for s in first) == ["failed", "passed"]
    diagnoses = client.get(f"/api/v1/burn-in/sites/{rack.site.id}/diagnoses/?device={rack.bad.id}").json()
    assert [(d["hostname"], d["requirement"], d["topology_label"]) for d in diagnoses["results"]] == [
        ("a01-n05", "rack-nccl", "rack-a01")
    ]


def _counted(function, **kwargs):
    with CaptureQueriesContext(connection) as queries:
        result = function(**kwargs)
    return len(queries), result


def test_the_planner_takes_the_same_queries_at_two_fleet_sizes(fleet):
    counts = []
    for other_racks in (0, 12):
        with connection.cursor() as cursor:
            cursor.execute("SAVEPOINT sizes")
        rack = Rack(fleet, other_racks=other_racks)
        preview, _ = _counted(isolation_preview, site=rack.site, topology_id=rack.rack.id, requirement_name="rack-nccl")
        dispatch, plan = _counted(
            isolation_dispatch, site=rack.site, topology_id=rack.rack.id, requirement_name="rack-nccl", requested_by="t"
        )
        rack.run_round()
        advance, _ = _counted(isolation_advance, site=rack.site, plan_id=plan.id, requested_by="t")
        counts.append((preview, dispatch, advance))
        with connection.cursor() as cursor:
            cursor.execute("ROLLBACK TO SAVEPOINT sizes")
    assert counts[0] == counts[1], counts


def test_the_planner_takes_the_same_queries_for_a_rack_of_8_and_of_16(fleet):
    counts = []
    for size in (8, 16):
        with connection.cursor() as cursor:
            cursor.execute("SAVEPOINT sizes")
        rack = Rack(fleet, size=size)
        dispatch, plan = _counted(
            isolation_dispatch, site=rack.site, topology_id=rack.rack.id, requirement_name="rack-nccl", requested_by="t"
        )
        rack.run_round()
        advance, _ = _counted(isolation_advance, site=rack.site, plan_id=plan.id, requested_by="t")
        counts.append((dispatch, advance))
        with connection.cursor() as cursor:
            cursor.execute("ROLLBACK TO SAVEPOINT sizes")
    assert counts[0] == counts[1], counts


def test_fleet_isolate_dry_run_prints_the_plan_and_creates_nothing(fleet):
    import io

    from django.core.management import call_command

    Rack(fleet)
    out = io.StringIO()
    call_command("isolate", "--site", "lon-1", "--topology", "rack-a01", "--dry-run", stdout=out)
    text = out.getvalue()
    assert "rack-a01 · rack-nccl: cohort of 8" in text and "at most 4 rounds" in text
    assert text.count("collective over ") == 2 and "nothing created" in text
    assert Job.objects.count() == 0 and IsolationPlan.objects.count() == 0


def test_a_round_job_that_ended_without_running_is_dispatched_again_not_blamed(fleet):
    """A job that ends with no execution (its lease lost on a slow satellite) says nothing about its
    devices: its subset runs again, and only the faulty device is named."""
    rack = Rack(fleet)
    plan = isolation_dispatch(site=rack.site, topology_id=rack.rack.id, requirement_name="rack-nccl", requested_by="t")
    # Given the first round's subset without the bad device ends without running its collective
    healthy = next(s for s in plan.rounds[0]["subsets"] if str(rack.bad.id) not in s["suspects"])
    claimed = jobs_claim(satellite=rack.satellite, capacity=10)
    lost = next(j for j in claimed if str(j.id) == healthy["job_id"])
    job_finish(job_id=lost.id, outcome=JobStatus.FAILED)
    for job in claimed:
        if job.id != lost.id:
            members = set(JobDevice.objects.filter(job=job).values_list("device_id", flat=True))
            metrics = BAD if rack.bad.id in members else GOOD
            execution = execution_report(
                execution_id=uuid4(),
                report=ExecutionReport(
                    requirement="rack-nccl",
                    test=None,
                    device_id=None,
                    topology_id=rack.rack.id,
                    job_id=job.id,
                    status="completed",
                    parameters={},
                    metrics=metrics,
                    error="",
                    started_at=None,
                    finished_at=None,
                ),
                actor=None,
                reported_by="test",
            ).execution
            job_finish(job_id=job.id, outcome=JobStatus.SUCCEEDED)
            evaluate(execution, rack.nccl, rack.site, passed=metrics is GOOD)
    # When the plan advances
    plan = isolation_advance(site=rack.site, plan_id=plan.id, requested_by="t")
    # Then the round is not decided: that subset runs again, on the same devices
    assert len(plan.rounds) == 1 and plan.status == IsolationStatus.RUNNING
    again = next(s for s in plan.rounds[0]["subsets"] if s["suspects"] == healthy["suspects"])
    assert again["job_id"] != healthy["job_id"] and again["tries"] == 2
    # And run to the end, only the faulty device is named
    while plan.status == IsolationStatus.RUNNING:
        rack.run_round()
        plan = isolation_advance(site=rack.site, plan_id=plan.id, requested_by="t")
    assert plan.status == IsolationStatus.FOUND
    assert plan.state["culprits"] == [str(rack.bad.id)]
