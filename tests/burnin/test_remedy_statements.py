"""The remediation ladder costs a constant number of statements (docs/remediation.md): a collective's members that
log their own Xids are judged together (their history and steps read at once, the steps and their jobs written at
once, the moves to repair applied at once), and the steps waiting on ended jobs are dispatched together. Each is
measured at two sizes that must give the same count (tests/architecture: "constant queries per request")."""

from __future__ import annotations

import uuid

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from fleet.burnin.models import RemedyStep
from fleet.inventory.models import Device
from fleet.jobs.models import Job
from fleet.jobs.services import JobSpec, job_finish, jobs_create, jobs_end
from fleet.lifecycle.models import DeviceStateChange
from fleet_rules.vocabulary import DeviceState, JobReason, JobStatus, TransitionCause, WorkflowName
from tests.burnin.test_execution_health import HEALTH_RULES, RC, URL, event, health
from tests.payloads import rack_collective

pytestmark = pytest.mark.django_db


@pytest.fixture
def reporter(bearer):
    return bearer(["test-execution:report"])


@pytest.fixture
def requirements(fleet):
    # every move to repair here is one the ladder meant: the breaker's share would otherwise trip at one size only
    policy = fleet.policy(RC)
    type(policy).objects.filter(id=policy.id).update(breaker_share=1.0)
    single = fleet.requirement(policy, "gpu-health-window", test="health-window", thresholds=HEALTH_RULES)
    fleet.requirement(policy, "rack-nccl", scope="multi_node", unit="rack", test="nccl-multi")
    return single


def _rack(fleet, single, size: int) -> tuple:
    """A site of its own (its own breaker scope) with a rack of `size` devices, each with a clean single-node
    burn-in (what a member's step runs again)."""
    site = fleet.site()
    satellite = fleet.satellite(site)
    rack = fleet.topology(satellite, "rack")
    devices = [fleet.device(satellite, RC, topologies=[rack]) for _ in range(size)]
    for device in devices:
        fleet.execution(single, device=device, health=health())
    return satellite, rack, devices


def _collective(rack, logging: list, quiet: list, job: Job | None = None) -> dict:
    """The rack's collective, finished: `logging` members each logged an Xid 95 of their own (fewer than half
    the rack: not the workload's burst)."""
    members = {d: health(event(95, at=timezone.now().isoformat())) for d in logging} | {d: health() for d in quiet}
    return rack_collective(rack, members, **({"job_id": str(job.id)} if job is not None else {}))


def _remediation_jobs(devices) -> list[Job]:
    return list(Job.objects.filter(reason=JobReason.REMEDIATION, job_devices__device__in=devices, finished_at=None))


def test_a_collective_judges_3_or_12_members_logging_xids_in_the_same_statements(reporter, fleet, requirements):
    counts = []
    for logging in (3, 12):
        _, rack, devices = _rack(fleet, requirements, 2 * logging + 1)
        members, quiet = devices[:logging], devices[logging:]
        accepted = members[: logging // 3]  # no burn-in job can hold them: the ladder sends them to repair
        Device.objects.filter(id__in=[d.id for d in accepted]).update(state=DeviceState.ACCEPTED)

        with CaptureQueriesContext(connection) as queries:
            response = reporter.put(URL.format(uuid.uuid4()), _collective(rack, members, quiet), format="json")

        assert response.status_code == 201, response.content
        assert response.json()["status"] == "completed"
        stepping = members[logging // 3 :]
        steps = list(RemedyStep.objects.filter(device__in=devices).select_related("job"))
        assert sorted(s.device_id for s in steps) == sorted(d.id for d in stepping)
        # no job saw the events: each step has its remediation job at once, the device's single-node burn-in
        assert all(s.step == "reset_gpu" and s.outcome == "under_way" and s.job is not None for s in steps)
        assert all(s.job.requirement_names == ["gpu-health-window"] for s in steps)
        moved = DeviceStateChange.objects.filter(device__in=accepted, cause=TransitionCause.FATAL_XID)
        assert sorted(moved.values_list("device_id", flat=True)) == sorted(d.id for d in accepted)
        counts.append(len(queries))
    assert counts[0] == counts[1], counts


def _collective_job(satellite, rack, devices) -> Job:
    spec = JobSpec(
        satellite.site_id,
        satellite.id,
        WorkflowName.MULTI_NODE_COLLECTIVE,
        tuple(d.id for d in devices),
        {"requirements": [{"name": "rack-nccl", "test": "nccl-multi", "parameters": {}}]},
        topology_id=rack.id,
    )
    (job,) = jobs_create(specs=[spec], requested_by="test")
    return job


def test_dispatching_2_or_8_waiting_steps_costs_the_same_statements(reporter, fleet, requirements):
    counts: dict[str, list[int]] = {"asked": [], "failed": [], "exhausted": []}
    for waiting in (2, 8):
        satellite, rack, devices = _rack(fleet, requirements, 2 * waiting + 1)
        members = devices[:waiting]
        seeing = _collective_job(satellite, rack, devices)
        body = _collective(rack, members, devices[waiting:], job=seeing)
        assert reporter.put(URL.format(uuid.uuid4()), body, format="json").status_code == 201
        assert RemedyStep.objects.filter(device__in=members, job=None).count() == waiting  # the job holds them

        # the job that saw the events ends: every waiting step gets its remediation job
        with CaptureQueriesContext(connection) as queries:
            job_finish(job_id=seeing.id, outcome=JobStatus.SUCCEEDED)
        counts["asked"].append(len(queries))
        resets = _remediation_jobs(members)
        assert len(resets) == waiting

        # the resets' jobs end without a burn-in after them (their leases ran out together): each step failed,
        # the ladder goes on to a reboot, asked at once
        with CaptureQueriesContext(connection) as queries:
            jobs_end(
                job_ids=[j.id for j in resets],
                status=JobStatus.FAILED,
                failure_reason="gone",
                why="",
                now=timezone.now(),
            )
        counts["failed"].append(len(queries))
        steps = RemedyStep.objects.filter(device__in=members)
        assert sorted(steps.values_list("step", "outcome")) == sorted(
            [("reboot", "under_way"), ("reset_gpu", "failed")] * waiting
        )
        reboots = _remediation_jobs(members)
        assert {j.parameters["remedy"]["step"] for j in reboots} == {"reboot"} and len(reboots) == waiting

        # the reboots fail too: the ladder is exhausted, every member goes to repair
        with CaptureQueriesContext(connection) as queries:
            jobs_end(
                job_ids=[j.id for j in reboots],
                status=JobStatus.FAILED,
                failure_reason="gone",
                why="",
                now=timezone.now(),
            )
        counts["exhausted"].append(len(queries))
        assert set(Device.objects.filter(id__in=[d.id for d in members]).values_list("state", flat=True)) == {
            DeviceState.NEEDS_REPAIR
        }
    assert all(small == large for small, large in counts.values()), counts


def test_a_step_whose_job_is_refused_fails_alone_and_the_others_get_theirs(reporter, fleet, requirements):
    """The steps' jobs are created together: a device no burn-in job can hold any more (moved while its step
    waited) fails its own step, with the refusal, and no other."""
    satellite, rack, devices = _rack(fleet, requirements, 5)
    members = devices[:2]
    seeing = _collective_job(satellite, rack, devices)
    body = _collective(rack, members, devices[2:], job=seeing)
    assert reporter.put(URL.format(uuid.uuid4()), body, format="json").status_code == 201
    Device.objects.filter(id=members[0].id).update(state=DeviceState.ACCEPTED)

    job_finish(job_id=seeing.id, outcome=JobStatus.SUCCEEDED)

    refused = RemedyStep.objects.get(device=members[0])
    assert (refused.outcome, refused.job_id) == ("failed", None) and refused.finished_at is not None
    assert refused.result == f"Device {members[0].hostname} is not eligible for burn-in (state accepted)."
    taken = RemedyStep.objects.get(device=members[1])
    assert taken.outcome == "under_way" and taken.job is not None and taken.job.reason == JobReason.REMEDIATION
