"""The Job path and the lease protocol satellites use."""

from __future__ import annotations

import threading
from datetime import timedelta

import pytest
from django.db import connections
from django.utils import timezone

from fleet.burnin.models import TestExecution
from fleet.jobs.models import Job, JobDevice
from fleet.jobs.services import JobRefused, JobSpec, job_create, jobs_claim, jobs_create, jobs_create_each
from fleet_rules.vocabulary import JobReason

CLAIM = "/api/v1/jobs/claim/"


@pytest.fixture
def yard(fleet):
    site = fleet.site("lon-1")
    satellite = fleet.satellite(site, "sat-a", workflows=["SingleNodeBurnInWorkflow"])
    devices = [fleet.device(satellite, hostname=f"n{i:02d}") for i in range(6)]
    policy = fleet.policy()
    requirement = fleet.requirement(policy, "gpu-diag")
    return site, satellite, devices, requirement


def new_job(site, satellite, device, requirement="gpu-diag"):
    return job_create(
        spec=JobSpec(
            site.id,
            satellite.id,
            "SingleNodeBurnInWorkflow",
            (device.id,),
            {"requirements": [{"name": requirement, "test": "dcgm-diag", "parameters": {}}]},
        ),
        requested_by="test",
    )


def test_the_job_path_refuses_a_second_active_job_for_a_device(yard):
    site, satellite, devices, _ = yard
    new_job(site, satellite, devices[0])
    with pytest.raises(JobRefused, match="already held"):
        new_job(site, satellite, devices[0])
    assert JobDevice.objects.filter(device=devices[0], active=True).count() == 1


def test_the_partial_unique_index_is_the_last_line(yard):
    from django.db import IntegrityError, transaction

    site, satellite, devices, _ = yard
    job = new_job(site, satellite, devices[0])
    other = Job.objects.create(site=site, satellite=satellite, workflow_name="SingleNodeBurnInWorkflow")
    with pytest.raises(IntegrityError), transaction.atomic():
        JobDevice.objects.create(job=other, device=devices[0], active=True)
    assert job.job_devices.get().active


def test_created_jobs_read_back_as_the_instances_returned(yard, fleet):
    site, satellite, devices, _ = yard
    rack = fleet.topology(satellite)
    specs = [
        JobSpec(site.id, satellite.id, "SingleNodeBurnInWorkflow", (devices[0].id,), {"requirements": [{"n": 1.5}]}),
        JobSpec(
            site.id, satellite.id, "MultiNodeBurnInCollectiveWorkflow", (devices[1].id, devices[2].id), {}, rack.id
        ),
    ]
    created = jobs_create(specs=specs, requested_by="lead", reason=JobReason.DISPATCH)
    stored = {job.id: job for job in Job.objects.all()}
    fields = [f.attname for f in Job._meta.concrete_fields]
    assert [{f: getattr(stored[j.id], f) for f in fields} for j in created] == [
        {f: getattr(j, f) for f in fields} for j in created
    ]
    assert not created[0]._state.adding
    assert {(d.job_id, d.device_id, d.active) for d in JobDevice.objects.all()} == {
        (created[0].id, devices[0].id, True),
        (created[1].id, devices[1].id, True),
        (created[1].id, devices[2].id, True),
    }


def test_a_broken_job_is_not_reported_as_a_device_taken(yard):
    from django.db import IntegrityError

    site, satellite, devices, _ = yard
    multi_node_without_topology = JobSpec(site.id, satellite.id, "MultiNodeBurnInCollectiveWorkflow", (devices[0].id,))
    with pytest.raises(IntegrityError, match="jobs_job_topology_iff_multi_node"):
        jobs_create(specs=[multi_node_without_topology], requested_by="test")


@pytest.mark.django_db(transaction=True)
def test_a_device_taken_meanwhile_refuses_the_whole_batch(yard):
    """Another transaction gives a device an active job after this one checked it: the insert
    waits for it, then fails on the partial unique index, and none of the batch's jobs remain."""
    site, satellite, devices, _ = yard
    other = Job.objects.create(site=site, satellite=satellite, workflow_name="SingleNodeBurnInWorkflow")
    taker = connections.create_connection("default")
    taker.set_autocommit(False)
    with taker.cursor() as cursor:
        cursor.execute(
            "INSERT INTO jobs_jobdevice (job_id, device_id, active) VALUES (%s, %s, true)",
            [other.id, devices[1].id],
        )
    taker.inc_thread_sharing()  # committed by the timer's thread
    committer = threading.Timer(1.0, taker.commit)
    committer.start()
    specs = [JobSpec(site.id, satellite.id, "SingleNodeBurnInWorkflow", (device.id,), {}) for device in devices[:3]]
    try:
        with pytest.raises(JobRefused, match="taken by another active job"):
            jobs_create(specs=specs, requested_by="test")
    finally:
        # The insert above is released by the server's COMMIT, possibly before the timer's thread
        # has read COMMIT's answer: closing the connection under it then broke that read (seen
        # on a loaded machine with the suite on 4 workers).
        committer.join(timeout=30)
        taker.close()
    assert set(Job.objects.values_list("id", flat=True)) == {other.id}
    assert list(JobDevice.objects.values_list("device_id", flat=True)) == [devices[1].id]


def test_the_job_path_refuses_an_ineligible_device(yard):
    site, satellite, devices, _ = yard
    devices[0].state = "in_service"
    devices[0].save()
    with pytest.raises(JobRefused, match="not eligible"):
        new_job(site, satellite, devices[0])
    assert Job.objects.count() == 0


def test_creating_each_job_refuses_a_spec_alone_and_creates_the_others(yard):
    site, satellite, devices, _ = yard
    type(devices[1]).objects.filter(id=devices[1].id).update(state="in_service")
    holder = new_job(site, satellite, devices[2])

    def spec(device):
        return JobSpec(site.id, satellite.id, "SingleNodeBurnInWorkflow", (device.id,), {})

    asked = [devices[0], devices[1], devices[2], devices[0], devices[3]]
    created = jobs_create_each(specs=[spec(d) for d in asked], requested_by="test")

    refusals = [str(r) if isinstance(r, JobRefused) else None for r in created]
    assert refusals == [
        None,
        "Device n01 is not eligible for burn-in (state in_service).",
        f"Device(s) already held by an active job: job {holder.id} holds n02.",
        "A device appears in more than one of the jobs to create.",
        None,
    ]
    assert created[2].holding == {holder.id: ["n02"]}
    made = {j.id for j in created if isinstance(j, Job)}
    assert set(Job.objects.exclude(id=holder.id).values_list("id", flat=True)) == made
    assert set(JobDevice.objects.filter(job_id__in=made).values_list("device_id", flat=True)) == {
        devices[0].id,
        devices[3].id,
    }


def test_claim_hands_out_queued_jobs_oldest_first_with_a_lease(bearer, yard):
    site, satellite, devices, _ = yard
    jobs = [new_job(site, satellite, d) for d in devices[:3]]
    client = bearer(["job:run"], satellite=satellite)
    body = client.post(CLAIM, {"site_slug": "lon-1", "satellite_name": "sat-a", "capacity": 2}, format="json").json()
    assert [j["id"] for j in body["jobs"]] == [str(j.id) for j in jobs[:2]]
    assert {j["status"] for j in body["jobs"]} == {"running"}
    assert body["jobs"][0]["devices"][0]["hostname"] == "n00"
    assert body["jobs"][0]["lease_expires_at"]
    rest = client.post(CLAIM, {"site_slug": "lon-1", "satellite_name": "sat-a", "capacity": 5}, format="json").json()
    assert [j["id"] for j in rest["jobs"]] == [str(jobs[2].id)]


@pytest.mark.django_db(transaction=True)
def test_two_agents_claiming_at_once_never_get_the_same_job(fleet):
    site = fleet.site("lon-1")
    satellite = fleet.satellite(site, "sat-a")
    fleet.requirement(fleet.policy(), "gpu-diag")
    devices = [fleet.device(satellite) for _ in range(40)]
    for device in devices:
        new_job(site, satellite, device)
    claimed: dict[str, list] = {"a": [], "b": []}
    barrier = threading.Barrier(2)

    def agent(name):
        try:
            barrier.wait(10)
            while True:
                got = jobs_claim(satellite=satellite, capacity=3)
                if not got:
                    return
                claimed[name] += [j.id for j in got]
        finally:
            connections.close_all()

    threads = [threading.Thread(target=agent, args=(n,)) for n in claimed]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert not set(claimed["a"]) & set(claimed["b"])
    assert len(claimed["a"]) + len(claimed["b"]) == 40


def test_an_expired_lease_fails_the_job_and_frees_its_devices_at_the_next_claim(yard, fleet):
    site, satellite, devices, requirement = yard
    job = new_job(site, satellite, devices[0])
    jobs_claim(satellite=satellite, capacity=1)
    running = fleet.execution(requirement, device=devices[0], status="running", job=job)
    Job.objects.filter(id=job.id).update(lease_expires_at=timezone.now() - timedelta(seconds=1))
    assert jobs_claim(satellite=satellite, capacity=1) == []
    job.refresh_from_db()
    assert (job.status, job.failure_reason) == ("failed", "lease expired")
    assert not JobDevice.objects.filter(device=devices[0], active=True).exists()
    running.refresh_from_db()
    assert running.status == "errored" and "lease expired" in running.error
    new_job(site, satellite, devices[0])  # the device is free again


def test_heartbeat_extends_the_lease_and_finish_releases_the_devices(bearer, yard):
    site, satellite, devices, _ = yard
    job = new_job(site, satellite, devices[0])
    client = bearer(["job:run"], satellite=satellite)
    claimed = client.post(CLAIM, {"site_slug": "lon-1", "satellite_name": "sat-a"}, format="json").json()["jobs"][0]
    beat = client.post(f"/api/v1/jobs/{job.id}/heartbeat/").json()
    assert beat["lease_expires_at"] >= claimed["lease_expires_at"]
    done = client.post(f"/api/v1/jobs/{job.id}/finish/", {"status": "succeeded"}, format="json")
    assert done.status_code == 200 and done.json()["status"] == "succeeded"
    assert done.json()["devices"][0]["active"] is False
    again = client.post(f"/api/v1/jobs/{job.id}/finish/", {"status": "succeeded"}, format="json")
    assert again.status_code == 200
    conflict = client.post(f"/api/v1/jobs/{job.id}/finish/", {"status": "failed"}, format="json")
    assert conflict.status_code == 409 and conflict.json()["code"] == "conflict"
    late = client.post(f"/api/v1/jobs/{job.id}/heartbeat/")
    assert late.status_code == 409


def test_a_heartbeat_after_the_lease_ran_out_fails_the_job(bearer, yard):
    site, satellite, devices, _ = yard
    job = new_job(site, satellite, devices[0])
    client = bearer(["job:run"], satellite=satellite)
    client.post(CLAIM, {"site_slug": "lon-1", "satellite_name": "sat-a"}, format="json")
    Job.objects.filter(id=job.id).update(lease_expires_at=timezone.now() - timedelta(seconds=1))
    response = client.post(f"/api/v1/jobs/{job.id}/heartbeat/")
    assert response.status_code == 409 and "lease expired" in response.json()["detail"]
    job.refresh_from_db()
    assert job.status == "failed"
    assert not JobDevice.objects.filter(active=True).exists()


def test_a_satellite_cannot_claim_or_finish_another_satellites_jobs(bearer, yard, fleet):
    site, satellite, devices, _ = yard
    other = fleet.satellite(site, "sat-b")
    job = new_job(site, satellite, devices[0])
    intruder = bearer(["job:run"], satellite=other)
    assert intruder.post(CLAIM, {"site_slug": "lon-1", "satellite_name": "sat-a"}, format="json").status_code == 403
    assert intruder.post(f"/api/v1/jobs/{job.id}/finish/", {"status": "failed"}, format="json").status_code == 403


def test_operators_cancel_and_list_jobs(bearer, yard):
    site, satellite, devices, _ = yard
    jobs = [new_job(site, satellite, d) for d in devices[:2]]
    operator = bearer(["job:create", "fleet:read"])
    cancelled = operator.post(f"/api/v1/jobs/{jobs[0].id}/cancel/")
    assert cancelled.status_code == 200 and cancelled.json()["status"] == "cancelled"
    assert operator.post(f"/api/v1/jobs/{jobs[0].id}/cancel/").status_code == 409
    queued = operator.get("/api/v1/jobs/?status=queued").json()["results"]
    assert [j["id"] for j in queued] == [str(jobs[1].id)]
    by_device = operator.get(f"/api/v1/jobs/?device={devices[0].id}").json()["results"]
    assert [j["status"] for j in by_device] == ["cancelled"]
    assert operator.get(f"/api/v1/jobs/{jobs[1].id}/").json()["devices"][0]["hostname"] == "n01"
    assert bearer(["job:run"], name="agent").post(f"/api/v1/jobs/{jobs[1].id}/cancel/").status_code == 403


def test_unknown_job_is_404(bearer, yard):
    client = bearer(["job:run"])
    assert client.post("/api/v1/jobs/00000000-0000-0000-0000-000000000000/heartbeat/").status_code == 404
    assert TestExecution.objects.count() == 0


def test_a_dead_satellites_expired_jobs_do_not_hold_devices_against_a_dispatch(bearer, fleet):
    from tests.burnin.test_rerun import World, dispatch

    world = World(fleet, rack_requirement=False)
    world.sweep()
    client = bearer(["job:create"])
    first = dispatch(client, world, [world.devices[0].id])
    job = Job.objects.get(id=first["created_jobs"][0]["job_id"])
    jobs_claim(satellite=world.satellite, capacity=1)
    running = fleet.execution(world.diag, device=world.devices[0], status="running", job=job)
    Job.objects.filter(id=job.id).update(lease_expires_at=timezone.now() - timedelta(seconds=1))
    # The satellite never claims again; an operator dispatches the device once more.
    again = dispatch(client, world, [world.devices[0].id])
    job.refresh_from_db()
    running.refresh_from_db()
    assert (job.status, running.status) == ("failed", "errored")
    world.sweep()
    assert not any(g["reason"] == "device_contended" for g in again["skips"])


def test_cancelling_a_job_closes_its_running_executions(bearer, yard, fleet):
    site, satellite, devices, requirement = yard
    job = new_job(site, satellite, devices[0])
    jobs_claim(satellite=satellite, capacity=1)
    running = fleet.execution(requirement, device=devices[0], status="running", job=job)
    assert bearer(["job:create"]).post(f"/api/v1/jobs/{job.id}/cancel/").status_code == 200
    running.refresh_from_db()
    assert running.status == "errored" and "cancelled" in running.error
