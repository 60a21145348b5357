"""The remediation ladder in the service (docs/remediation.md): a window whose events ask for a GPU reset or a
reboot records a step, the step gets its own `remediation` job when the job that saw the events ends, the burn-in
after it judges it (cured or persisted), and only an exhausted ladder sends the device to repair."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

import pytest
from django.utils import timezone

from fleet.burnin.models import RemedyStep
from fleet.jobs.models import Job
from fleet.jobs.services import JobSpec, job_finish, jobs_create
from fleet.lifecycle.models import DeviceStateChange
from fleet_rules.vocabulary import DeviceState, JobReason, JobStatus, TransitionCause, WorkflowName
from tests.burnin.test_execution_health import URL, event, health, report, setting, state_of

__all__ = ["setting"]  # the fixture, shared with the health evidence's tests


def _at() -> str:
    return timezone.now().astimezone(UTC).isoformat().replace("+00:00", "Z")


@pytest.fixture
def reporter(bearer):
    return bearer(["test-execution:report"])


def _job(device, reason: JobReason = JobReason.DISPATCH) -> Job:
    spec = JobSpec(
        device.site_id,
        device.satellite_id,
        WorkflowName.SINGLE_NODE,
        (device.id,),
        {"requirements": [{"name": "gpu-health-window", "test": "health-window", "parameters": {}}]},
    )
    (job,) = jobs_create(specs=[spec], requested_by="test", reason=reason)
    return job


def _window(reporter, device, job: Job, *events: dict) -> None:
    body = report(device, health(*events), job_id=str(job.id))
    response = reporter.put(URL.format(uuid.uuid4()), body, format="json")
    assert response.status_code == 201, response.content


def _remediation_job(device) -> Job:
    return Job.objects.get(reason=JobReason.REMEDIATION, job_devices__device=device, finished_at__isnull=True)


def test_a_95_asks_for_a_reset_whose_job_comes_when_the_seeing_job_ends_and_a_clean_rerun_cures_it(reporter, setting):
    device, _, _ = setting
    seeing = _job(device)

    _window(reporter, device, seeing, event(95, at=_at()))

    (step,) = RemedyStep.objects.filter(device=device)
    assert (step.step, step.outcome, step.job_id, step.gpus) == ("reset_gpu", "under_way", None, ["0000:3b:00"])
    assert step.reason == "Xid 95 (Uncontained memory error) on GPU 0000:3b:00: GPU reset asked"

    job_finish(job_id=seeing.id, outcome=JobStatus.SUCCEEDED)

    remediation = _remediation_job(device)
    assert remediation.parameters["remedy"] == {
        "id": str(step.id),
        "step": "reset_gpu",
        "gpus": ["0000:3b:00"],
        "reason": step.reason,
    }
    assert remediation.requirement_names == ["gpu-health-window"]  # the burn-in again, after the step

    _window(reporter, device, remediation)  # the burn-in after the reset logged nothing

    step.refresh_from_db()
    assert step.outcome == "cured" and step.judged_by is not None and step.finished_at is not None
    job_finish(job_id=remediation.id, outcome=JobStatus.SUCCEEDED)
    assert state_of(device) == DeviceState.BURN_IN and not DeviceStateChange.objects.exists()
    assert RemedyStep.objects.filter(device=device).count() == 1


def test_a_persisting_95_takes_a_reset_then_a_reboot_then_goes_to_repair_with_the_ladder_in_the_reason(
    reporter, setting
):
    device, _, _ = setting
    seeing = _job(device)
    _window(reporter, device, seeing, event(95, at=_at()))
    job_finish(job_id=seeing.id, outcome=JobStatus.SUCCEEDED)

    reset = _remediation_job(device)
    _window(reporter, device, reset, event(95, at=_at()))
    job_finish(job_id=reset.id, outcome=JobStatus.SUCCEEDED)

    steps = list(RemedyStep.objects.filter(device=device).order_by("created_at"))
    assert [(s.step, s.outcome) for s in steps] == [("reset_gpu", "persisted"), ("reboot", "under_way")]
    assert "2nd in 24 h: reboot" in steps[1].reason
    assert state_of(device) == DeviceState.BURN_IN

    reboot = _remediation_job(device)
    assert reboot.parameters["remedy"]["step"] == "reboot"
    _window(reporter, device, reboot, event(95, at=_at()))

    assert state_of(device) == DeviceState.NEEDS_REPAIR
    (change,) = DeviceStateChange.objects.filter(device=device)
    assert change.cause == TransitionCause.FATAL_XID
    assert change.reason.startswith("Xid 95 (Uncontained memory error) on GPU 0000:3b:00: GPU reset asked; 3rd in 24 h")
    assert "the ladder is exhausted in 24 h: GPU reset at " in change.reason
    assert ": persisted; reboot at " in change.reason and change.reason.endswith(": persisted")
    assert [(s["step"], s["outcome"]) for s in change.refs["ladder"]] == [
        ("reset_gpu", "persisted"),
        ("reboot", "persisted"),
    ]
    assert change.refs["ladder_exhausted"] is True


def test_a_step_whose_job_fails_is_failed_and_the_ladder_goes_on(reporter, setting):
    device, _, _ = setting
    seeing = _job(device)
    _window(reporter, device, seeing, event(95, at=_at()))
    job_finish(job_id=seeing.id, outcome=JobStatus.SUCCEEDED)

    reset = _remediation_job(device)
    job_finish(job_id=reset.id, outcome=JobStatus.FAILED, reason="the GPU reset failed: nvidia-smi exited 1")

    steps = list(RemedyStep.objects.filter(device=device).order_by("created_at"))
    assert [(s.step, s.outcome) for s in steps] == [("reset_gpu", "failed"), ("reboot", "under_way")]
    assert steps[0].result == "the GPU reset failed: nvidia-smi exited 1"
    assert _remediation_job(device).parameters["remedy"]["step"] == "reboot"


def test_an_accepted_device_cannot_take_a_step_and_goes_to_repair(reporter, setting):
    device, _, _ = setting
    type(device).objects.filter(id=device.id).update(state=DeviceState.ACCEPTED)

    reporter.put(URL.format(uuid.uuid4()), report(device, health(event(79))), format="json")

    assert state_of(device) == DeviceState.NEEDS_REPAIR
    assert DeviceStateChange.objects.get(device=device).reason.endswith(
        "reboot asked, but no burn-in job can hold a device accepted"
    )
    assert not RemedyStep.objects.exists()


def test_a_report_without_a_job_gets_its_step_job_at_once_with_the_requirement_that_saw_it(reporter, setting):
    device, _, _ = setting
    reporter.put(URL.format(uuid.uuid4()), report(device, health(event(79, at=_at()))), format="json")

    assert state_of(device) == DeviceState.BURN_IN and not DeviceStateChange.objects.exists()
    (step,) = RemedyStep.objects.filter(device=device)
    assert step.step == "reboot" and step.outcome == "under_way" and step.job is not None
    assert step.job.reason == JobReason.REMEDIATION and step.job.requirement_names == ["gpu-health-window"]
    assert datetime.now(UTC) >= step.created_at


def test_the_steps_are_counted_by_step_and_outcome_once_committed(
    reporter, setting, django_capture_on_commit_callbacks
):
    from prometheus_client import REGISTRY

    def counted(outcome: str) -> float:
        labels = {"step": "reset_gpu", "outcome": outcome}
        return REGISTRY.get_sample_value("fleet_remedy_steps_total", labels) or 0.0

    device, _, _ = setting
    seeing = _job(device)
    asked, cured = counted("under_way"), counted("cured")
    with django_capture_on_commit_callbacks(execute=True):
        _window(reporter, device, seeing, event(95, at=_at()))
        job_finish(job_id=seeing.id, outcome=JobStatus.SUCCEEDED)
        _window(reporter, device, _remediation_job(device))

    assert counted("under_way") == asked + 1 and counted("cured") == cured + 1


def test_a_bus_id_that_is_not_one_names_no_gpu_in_the_step(reporter, setting):
    """An event's `pci_bus_id` is the machine's text: a step's GPUs reach a command on the node, so only a PCI bus
    id is kept (the step still runs, on the whole node's GPUs as its command decides)."""
    device, _, _ = setting

    _window(reporter, device, _job(device), event(95, at=_at(), pci_bus_id="0000:3b:00 $(reboot)"))

    (step,) = RemedyStep.objects.filter(device=device)
    assert (step.step, step.gpus) == ("reset_gpu", [])


def test_a_step_that_follows_a_failed_one_is_counted_as_asked(reporter, setting, django_capture_on_commit_callbacks):
    """A reboot asked because the reset's job failed is counted under way, as one asked from a window is."""
    from prometheus_client import REGISTRY

    def counted(step: str, outcome: str) -> float:
        return REGISTRY.get_sample_value("fleet_remedy_steps_total", {"step": step, "outcome": outcome}) or 0.0

    device, _, _ = setting
    seeing = _job(device)
    reboots, resets_failed = counted("reboot", "under_way"), counted("reset_gpu", "failed")
    with django_capture_on_commit_callbacks(execute=True):
        _window(reporter, device, seeing, event(95, at=_at()))
        job_finish(job_id=seeing.id, outcome=JobStatus.SUCCEEDED)
        job_finish(job_id=_remediation_job(device).id, outcome=JobStatus.FAILED, reason="nvidia-smi exited 1")

    assert counted("reset_gpu", "failed") == resets_failed + 1
    assert counted("reboot", "under_way") == reboots + 1
