"""One autopilot pass on PostgreSQL: it dispatches within the blast radius and logs why, reruns
after the backoff, isolates a collective that fails while its members pass, leaves paused and
disabled sites alone, renews a certificate about to expire, and outlives a defect in one pass."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from fleet.autopilot.loop import passes_once
from fleet.autopilot.models import AutopilotAction, SiteAutopilot
from fleet.autopilot.services import AlreadyPaused, autopilot_pass, autopilot_pause, autopilot_resume
from fleet.burnin.models import IsolationPlan
from fleet.jobs.models import Job, JobDevice
from fleet.jobs.services import job_finish, jobs_claim
from fleet_rules.vocabulary import AutopilotActionKind, JobStatus, WorkflowName
from tests.burnin.sweeps import sweep_service
from tests.diagnosis.test_isolation import Rack

pytestmark = pytest.mark.django_db


class Hall:
    """A site with `racks` racks of `size` devices whose one requirement has not run."""

    def __init__(self, fleet, *, racks: int = 2, size: int = 4, max_under_test: int = 4, **settings):
        self.site = fleet.site("lon-1")
        self.satellite = fleet.satellite(self.site, "sat-a", workflows=list(WorkflowName.values))
        policy = fleet.policy("gpu.h200.8x")
        self.diag = fleet.requirement(policy, "gpu-diag")
        fleet.profile("gpu.h200.8x", "dcgm-diag", {"level": 2})
        self.devices = []
        for r in range(racks):
            rack = fleet.topology(self.satellite, "rack", f"rack-a{r:02d}")
            self.devices += [
                fleet.device(self.satellite, hostname=f"a{r:02d}-n{i:02d}", topologies=[rack]) for i in range(size)
            ]
        sweep_service("lon-1", "sat-a", "gpu.h200.8x")
        self.autopilot = SiteAutopilot.objects.create(
            site=self.site, enabled=True, max_under_test=max_under_test, **settings
        )


def held() -> set:
    return set(JobDevice.objects.filter(active=True).values_list("device_id", flat=True))


def test_a_pass_dispatches_at_most_max_under_test_devices_a_rack_first_and_says_why(fleet):
    hall = Hall(fleet, racks=2, size=4, max_under_test=4)
    done = autopilot_pass(site=hall.site, actor="autopilot@test")
    assert len(held()) == 4
    assert held() == {d.id for d in hall.devices if d.hostname.startswith("a00-")}
    (entry,) = AutopilotAction.objects.all()
    assert entry.kind == AutopilotActionKind.DISPATCH and len(entry.job_ids) == 4
    assert "burn-in of 4 device(s): a00-n00: 1 requirement(s) not run yet" in entry.reason
    assert entry.hostnames == [f"a00-n{i:02d}" for i in range(4)]
    assert [a.kind for a in done.decided] == [AutopilotActionKind.DISPATCH] * 4


def test_a_second_pass_adds_nothing_while_the_limit_is_reached_then_fills_what_ends(fleet):
    hall = Hall(fleet, racks=2, size=4, max_under_test=4)
    autopilot_pass(site=hall.site, actor="a")
    autopilot_pass(site=hall.site, actor="a")
    assert Job.objects.count() == 4 and AutopilotAction.objects.count() == 1
    (job, *_) = jobs_claim(satellite=hall.satellite, capacity=1)
    job_finish(job_id=job.id, outcome=JobStatus.FAILED, reason="lost")
    autopilot_pass(site=hall.site, actor="a")
    assert len(held()) == 4 and Job.objects.count() == 5


def test_a_paused_or_disabled_site_gets_no_action_and_resume_lets_it_act(fleet):
    hall = Hall(fleet)
    autopilot_pause(site=hall.site, actor="user:ops", reason="power work in hall 2")
    with pytest.raises(AlreadyPaused):
        autopilot_pause(site=hall.site, actor="user:ops", reason="again")
    autopilot_pass(site=hall.site, actor="a")
    assert Job.objects.count() == 0
    autopilot_resume(site=hall.site, actor="user:ops")
    autopilot_pass(site=hall.site, actor="a")
    assert Job.objects.count() == 4
    kinds = list(AutopilotAction.objects.values_list("kind", flat=True))
    assert kinds == [AutopilotActionKind.DISPATCH, AutopilotActionKind.RESUME, AutopilotActionKind.PAUSE]
    SiteAutopilot.objects.filter(site=hall.site).update(enabled=False)
    JobDevice.objects.update(active=False)
    autopilot_pass(site=hall.site, actor="a")
    assert Job.objects.count() == 4


def test_an_operator_job_is_never_dispatched_again(fleet):
    hall = Hall(fleet, racks=1, size=4, max_under_test=8)
    from fleet.burnin.reruns.service import rerun_dispatch
    from fleet_rules.vocabulary import PlanningMode

    rerun_dispatch(site=hall.site, device_ids=[hall.devices[0].id], mode=PlanningMode.NON_PASSING, requested_by="ops")
    autopilot_pass(site=hall.site, actor="a")
    assert Job.objects.count() == 4 and len(held()) == 4
    (entry,) = AutopilotAction.objects.all()
    assert str(hall.devices[0].id) not in entry.device_ids


def test_a_collective_failing_twice_while_its_members_pass_is_isolated(fleet):
    rack = Rack(fleet)
    SiteAutopilot.objects.create(site=rack.site, enabled=True, max_under_test=16)
    # Its collective failed twice under the current version, from jobs of the planner.
    from fleet.burnin.reruns.service import rerun_dispatch
    from fleet_rules.vocabulary import PlanningMode
    from tests.diagnosis.test_isolation import BAD, evaluate

    for _ in range(2):
        outcome = rerun_dispatch(
            site=rack.site, device_ids=[d.id for d in rack.devices], mode=PlanningMode.NON_PASSING, requested_by="t"
        )
        (job,) = outcome.created_jobs
        jobs_claim(satellite=rack.satellite, capacity=1)
        execution = fleet.execution(rack.nccl, topology=rack.rack, metrics=BAD, job=Job.objects.get(id=job.job_id))
        job_finish(job_id=job.job_id, outcome=JobStatus.SUCCEEDED)
        evaluate(execution, rack.nccl, rack.site, passed=False)
        sweep_service("lon-1", "sat-a", "gpu.h200.8x")
    autopilot_pass(site=rack.site, actor="a")
    (entry,) = AutopilotAction.objects.all()
    assert entry.kind == AutopilotActionKind.ISOLATE
    assert "rack-a01: rack-nccl failed 2 times while its 8 nodes passed in-node tests — re-running it" in entry.reason
    assert IsolationPlan.objects.count() == 1 and len(entry.job_ids) == 2
    autopilot_pass(site=rack.site, actor="a")  # its round is out: nothing more, nothing twice
    assert AutopilotAction.objects.count() == 1 and IsolationPlan.objects.count() == 1
    while IsolationPlan.objects.get().status == "running":
        rack.run_round()
        autopilot_pass(site=rack.site, actor="a")
    last = AutopilotAction.objects.first()
    assert last is not None and "culprit found" in last.reason and "a01-n05" in last.reason


def test_a_defect_in_one_pass_is_logged_and_the_next_site_still_gets_its_pass(fleet, monkeypatch):
    hall = Hall(fleet)
    other = fleet.site("par-1")
    SiteAutopilot.objects.create(site=other, enabled=True)
    import fleet.autopilot.loop as loop

    real = loop.autopilot_pass

    def broken(*, site, actor):
        if site.slug == "lon-1":
            raise RuntimeError("a defect")
        return real(site=site, actor=actor)

    monkeypatch.setattr(loop, "autopilot_pass", broken)
    passes_once("a")
    (entry,) = AutopilotAction.objects.filter(site=hall.site)
    assert entry.kind == AutopilotActionKind.DEFECT and "RuntimeError: a defect" in entry.reason
    monkeypatch.setattr(loop, "autopilot_pass", real)
    passes_once("a")
    assert Job.objects.count() == 4


def test_an_accepted_device_whose_certificate_expires_soon_is_renewed(fleet):
    hall = Hall(fleet, racks=1, size=1, max_under_test=4)
    (device,) = hall.devices
    evaluate_pass(fleet, hall, device)
    device.refresh_from_db()
    assert device.state == "accepted"
    from fleet.burnin.models import AcceptanceCertificate

    AcceptanceCertificate.objects.filter(device=device).update(valid_until=timezone.now() + timedelta(days=2))
    autopilot_pass(site=hall.site, actor="a")
    (entry,) = AutopilotAction.objects.all()
    assert entry.kind == AutopilotActionKind.RENEW and "not in service: burning it in again" in entry.reason
    device.refresh_from_db()
    assert device.state == "burn_in" and len(entry.job_ids) == 1
    change = device.state_changes.first()
    assert change is not None and change.cause == "renewal"


def evaluate_pass(fleet, hall, device) -> None:
    from tests.burnin.test_reconcile import evaluate

    evaluate(fleet.execution(hall.diag, device=device), hall.diag, hall.site)
    sweep_service("lon-1", "sat-a", "gpu.h200.8x")
