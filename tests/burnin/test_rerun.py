"""Rerun planning and dispatch, every reason reached through real data (executions, evaluations,
reconcile sweeps, jobs)."""

from __future__ import annotations

import gc
import io
import threading
import uuid
from collections import Counter

import pytest
from django.core.management import call_command
from django.db import connection, connections
from django.test.utils import CaptureQueriesContext

from fleet.jobs.models import Job, JobDevice
from fleet.jobs.services import JobSpec, job_create
from fleet.policies.models import AcceptancePolicy, ThresholdRule
from tests.burnin.sweeps import sweep_service
from tests.burnin.test_reconcile import evaluate

WORKFLOWS = ["SingleNodeBurnInWorkflow", "MultiNodeBurnInCollectiveWorkflow"]
SCOPE = ["job:create"]


class World:
    """lon-1 with sat-a; gpu.h200.8x: gpu-diag + nvbw (single-node) and rack-nccl (rack)."""

    def __init__(self, fleet, *, devices=4, workflows=WORKFLOWS, rack_requirement=True):
        self.fleet = fleet
        self.site = fleet.site("lon-1")
        self.satellite = fleet.satellite(self.site, "sat-a", workflows=workflows)
        self.rack = fleet.topology(self.satellite, "rack", "rack-a01")
        self.devices = [
            fleet.device(self.satellite, topologies=[self.rack], hostname=f"a01-n{i:02d}") for i in range(devices)
        ]
        self.policy = fleet.policy("gpu.h200.8x")
        self.diag = fleet.requirement(
            self.policy, "gpu-diag", test="dcgm-diag", parameter_constraints={"level": {"gte": 3}}
        )
        self.nvbw = fleet.requirement(self.policy, "nvbw", test="nvbandwidth")
        self.rack_nccl = (
            fleet.requirement(self.policy, "rack-nccl", scope="multi_node", unit="rack", test="nccl-multi")
            if rack_requirement
            else None
        )
        fleet.profile("gpu.h200.8x", "dcgm-diag", {"level": 3})
        fleet.profile("gpu.h200.8x", "nvbandwidth", {})
        fleet.profile("gpu.h200.8x", "nccl-multi", {"max_bytes": 8 << 30})

    def result(self, requirement, *, device=None, topology=None, passed=True):
        execution = self.fleet.execution(requirement, device=device, topology=topology)
        evaluate(execution, requirement, self.site, passed=passed)
        return execution

    def sweep(self):
        sweep_service("lon-1", "sat-a", "gpu.h200.8x")

    def hold(self, device, *requirement_names):
        """An active single-node job on `device` covering these requirements (another operator's)."""
        return job_create(
            spec=JobSpec(
                self.site.id,
                self.satellite.id,
                "SingleNodeBurnInWorkflow",
                (device.id,),
                {"requirements": [{"name": name} for name in requirement_names]},
            ),
            requested_by="test",
        )

    def pass_single_node(self, devices=None):
        for device in devices or self.devices:
            self.result(self.diag, device=device)
            self.result(self.nvbw, device=device)


def dispatch(client, world, device_ids, mode=None, preview=False):
    body = {"device_ids": [str(d) for d in device_ids]}
    if mode:
        body["mode"] = mode
    path = "" if preview else "dispatch/"
    response = client.post(f"/api/v1/burn-in/sites/{world.site.id}/rerun-plans/{path}", body, format="json")
    assert response.status_code == 200, response.content
    return response.json()


def reasons(body) -> dict:
    """(requirement, reason) → sorted device ids."""
    return {(g["requirement_name"], g["reason"]): sorted(g["device_ids"]) for g in body["skips"]}


def ids(*devices) -> list[str]:
    return sorted(str(d.id) for d in devices)


@pytest.fixture
def world(fleet):
    return World(fleet)


# --- exclusions ---------------------------------------------------------------------------------


def test_a_device_without_an_acceptance_policy_is_excluded(bearer, world, fleet):
    odd = fleet.device(world.satellite, "gpu.mi300x.8x")
    body = dispatch(bearer(SCOPE), world, [odd.id])
    assert body == {
        "created_jobs": [],
        "skips": [],
        "excluded_devices": [{"device_id": str(odd.id), "reason": "no_acceptance_policy"}],
    }


def test_a_policy_without_single_node_requirements_excludes_the_device(bearer, world, fleet):
    policy = fleet.policy("gpu.gb200.nvl72")
    fleet.requirement(policy, "nvl72-nccl", scope="multi_node", unit="nvlink-domain")
    device = fleet.device(world.satellite, "gpu.gb200.nvl72")
    body = dispatch(bearer(SCOPE), world, [device.id])
    assert body["excluded_devices"] == [{"device_id": str(device.id), "reason": "no_single_node_requirements"}]


def test_a_policy_without_rerunnable_requirements_excludes_the_device(bearer, world, fleet):
    policy = fleet.policy("gpu.gb200.nvl72")
    fleet.requirement(policy, "gpu-diag", rerunnable=False)
    device = fleet.device(world.satellite, "gpu.gb200.nvl72")
    body = dispatch(bearer(SCOPE), world, [device.id])
    assert body["excluded_devices"] == [{"device_id": str(device.id), "reason": "no_rerun_requirements"}]


# --- single-node reasons, one each ----------------------------------------------------------------


def test_first_run_dispatches_one_single_node_job_per_device_with_all_its_requirements(bearer, world):
    world.sweep()  # rows: not_run
    body = dispatch(bearer(SCOPE), world, [d.id for d in world.devices])
    single = [j for j in body["created_jobs"] if j["workflow_name"] == "SingleNodeBurnInWorkflow"]
    assert sorted(d for j in single for d in j["device_ids"]) == ids(*world.devices)
    job = Job.objects.get(id=single[0]["job_id"])
    assert [r["name"] for r in job.parameters["requirements"]] == ["gpu-diag", "nvbw"]
    assert job.parameters["requirements"][0]["parameters"] == {"level": 3}
    assert job.parameters["policy_version"] == 1
    assert job.topology is None and job.status == "queued"
    assert reasons(body) == {("rack-nccl", "topology_cohort_blocked"): ids(*world.devices)}


@pytest.mark.parametrize("preview", [False, True])
def test_planning_runs_with_the_cyclic_collector_paused(bearer, world, collector_seen, preview):
    """A selection of up to RERUN_MAX_DEVICES builds its facts and plan with no collection
    walking them (fleet.core.heap); collections resume once the request is done."""
    from fleet.burnin.reruns import service

    seen = collector_seen(service, "plan")
    world.sweep()
    dispatch(bearer(SCOPE), world, [d.id for d in world.devices], preview=preview)
    assert seen == [False]
    assert gc.isenabled()


def test_device_ineligible(bearer, world):
    world.sweep()
    world.devices[0].state = "accepted"
    world.devices[0].save()
    body = dispatch(bearer(SCOPE), world, [world.devices[0].id])
    assert reasons(body)[("gpu-diag", "device_ineligible")] == ids(world.devices[0])
    assert body["created_jobs"] == []


def test_workflow_unavailable(bearer, fleet):
    world = World(fleet, workflows=[])
    world.sweep()
    body = dispatch(bearer(SCOPE), world, [world.devices[0].id])
    assert reasons(body)[("gpu-diag", "workflow_unavailable")] == ids(world.devices[0])
    assert reasons(body)[("rack-nccl", "workflow_unavailable")] == ids(world.devices[0])


def test_policy_changed(bearer, world):
    world.sweep()
    ThresholdRule.objects.filter(requirement=world.nvbw).update(threshold=5)
    world.policy.version += 1
    world.policy.save()
    body = dispatch(bearer(SCOPE), world, [world.devices[0].id])
    assert reasons(body)[("gpu-diag", "policy_changed")] == ids(world.devices[0])


def test_projection_pending_without_a_row(bearer, world):
    body = dispatch(bearer(SCOPE), world, [world.devices[0].id])
    assert reasons(body)[("gpu-diag", "projection_pending")] == ids(world.devices[0])


def test_projection_pending_when_the_row_is_behind_the_latest_execution(bearer, world):
    world.result(world.diag, device=world.devices[0], passed=False)
    world.sweep()
    world.fleet.execution(world.diag, device=world.devices[0], status="running")
    body = dispatch(bearer(SCOPE), world, [world.devices[0].id])
    assert reasons(body)[("gpu-diag", "projection_pending")] == ids(world.devices[0])
    assert ("nvbw", "projection_pending") not in reasons(body)


def test_already_satisfied_only_in_non_passing_mode(bearer, world):
    world.result(world.diag, device=world.devices[0], passed=True)
    world.sweep()
    client = bearer(SCOPE)
    preview = dispatch(client, world, [world.devices[0].id], preview=True)
    assert reasons(preview)[("gpu-diag", "already_satisfied")] == ids(world.devices[0])
    assert [r["name"] for r in preview["planned_jobs"][0]["requirements"]] == ["nvbw"]
    everything = dispatch(client, world, [world.devices[0].id], mode="all", preview=True)
    assert ("gpu-diag", "already_satisfied") not in reasons(everything)
    assert [r["name"] for r in everything["planned_jobs"][0]["requirements"]] == ["gpu-diag", "nvbw"]
    assert Job.objects.count() == 0


def test_already_dispatched_and_dispatching_twice_creates_nothing(bearer, world):
    world.sweep()
    client = bearer(SCOPE)
    selection = [d.id for d in world.devices]
    first = dispatch(client, world, selection)
    assert len(first["created_jobs"]) == 4
    second = dispatch(client, world, selection)
    assert second["created_jobs"] == []
    assert reasons(second)[("gpu-diag", "already_dispatched")] == ids(*world.devices)
    assert reasons(second)[("nvbw", "already_dispatched")] == ids(*world.devices)
    assert Job.objects.count() == 4


def test_device_contended_by_a_job_for_other_requirements(bearer, world):
    world.sweep()
    device = world.devices[0]
    world.hold(device, "nvbw")
    body = dispatch(bearer(SCOPE), world, [device.id])
    assert reasons(body)[("gpu-diag", "device_contended")] == ids(device)
    assert reasons(body)[("nvbw", "already_dispatched")] == ids(device)


def test_no_policy_satisfying_parameter_source(bearer, world):
    world.sweep()
    from fleet.policies.models import ParameterProfile

    ParameterProfile.objects.filter(test="dcgm-diag").update(parameters={"level": 2})
    body = dispatch(bearer(SCOPE), world, [world.devices[0].id])
    assert reasons(body)[("gpu-diag", "no_policy_satisfying_parameter_source")] == ids(world.devices[0])
    assert [r["name"] for r in Job.objects.get().parameters["requirements"]] == ["nvbw"]


def test_the_newest_satisfying_profile_is_chosen(bearer, world):
    world.sweep()
    world.fleet.profile("gpu.h200.8x", "dcgm-diag", {"level": 4}, name="deep")
    world.fleet.profile("gpu.h200.8x", "dcgm-diag", {"level": 1}, name="quick")
    dispatch(bearer(SCOPE), world, [world.devices[0].id])
    requirement = Job.objects.get().parameters["requirements"][0]
    assert (requirement["parameters"], requirement["parameter_profile"]["name"]) == ({"level": 4}, "deep")


# --- precedence --------------------------------------------------------------------------------


def test_ineligible_precedes_workflow_unavailable(bearer, fleet):
    world = World(fleet, workflows=[])
    world.sweep()
    world.devices[0].state = "in_service"
    world.devices[0].save()
    assert ("gpu-diag", "device_ineligible") in reasons(dispatch(bearer(SCOPE), world, [world.devices[0].id]))


def test_workflow_unavailable_precedes_policy_changed(bearer, fleet):
    world = World(fleet, workflows=[])
    world.sweep()
    world.policy.version += 1
    world.policy.save()
    assert ("gpu-diag", "workflow_unavailable") in reasons(dispatch(bearer(SCOPE), world, [world.devices[0].id]))


def test_policy_changed_precedes_already_satisfied(bearer, world):
    world.result(world.diag, device=world.devices[0])
    world.sweep()
    world.policy.version += 1
    world.policy.save()
    assert ("gpu-diag", "policy_changed") in reasons(dispatch(bearer(SCOPE), world, [world.devices[0].id]))


def test_projection_pending_precedes_already_dispatched(bearer, world):
    world.sweep()
    client = bearer(SCOPE)
    dispatch(client, world, [world.devices[0].id])
    world.fleet.execution(world.diag, device=world.devices[0], status="running")
    assert ("gpu-diag", "projection_pending") in reasons(dispatch(client, world, [world.devices[0].id]))


def test_already_satisfied_precedes_already_dispatched(bearer, world):
    world.sweep()
    client = bearer(SCOPE)
    dispatch(client, world, [world.devices[0].id])
    world.result(world.diag, device=world.devices[0])
    world.sweep()
    body = dispatch(client, world, [world.devices[0].id])
    assert ("gpu-diag", "already_satisfied") in reasons(body)
    assert ("nvbw", "already_dispatched") in reasons(body)


def test_device_contended_precedes_no_parameter_source(bearer, world):
    world.sweep()
    from fleet.policies.models import ParameterProfile

    ParameterProfile.objects.filter(test="dcgm-diag").delete()
    device = world.devices[0]
    world.hold(device, "nvbw")
    assert ("gpu-diag", "device_contended") in reasons(dispatch(bearer(SCOPE), world, [device.id]))


# --- rack cohorts ------------------------------------------------------------------------------


def test_a_whole_passing_free_selected_cohort_is_one_collective_job(bearer, world):
    world.pass_single_node()
    world.sweep()
    body = dispatch(bearer(SCOPE), world, [d.id for d in world.devices])
    assert len(body["created_jobs"]) == 1
    job = body["created_jobs"][0]
    assert job["workflow_name"] == "MultiNodeBurnInCollectiveWorkflow"
    assert job["topology"] == {"id": str(world.rack.id), "unit": "rack", "label": "rack-a01"}
    assert sorted(job["device_ids"]) == ids(*world.devices)
    assert JobDevice.objects.filter(job_id=job["job_id"], active=True).count() == 4


@pytest.mark.parametrize("trouble", ["not_selected", "ineligible", "contended", "not_passing"])
def test_the_cohort_is_blocked(bearer, world, trouble):
    world.pass_single_node()
    world.sweep()
    odd = world.devices[3]
    selection = [d.id for d in world.devices]
    if trouble == "not_selected":
        selection.remove(odd.id)
    elif trouble == "ineligible":
        odd.state = "accepted"
        odd.save()
    elif trouble == "contended":
        world.hold(odd, "gpu-diag")
    else:
        world.result(world.nvbw, device=odd, passed=False)
        world.sweep()
    body = dispatch(bearer(SCOPE), world, selection)
    groups = [g for g in body["skips"] if g["requirement_name"] == "rack-nccl"]
    assert len(groups) == 1
    assert groups[0]["reason"] == "topology_cohort_blocked"
    assert groups[0]["topology"]["label"] == "rack-a01"
    assert groups[0]["device_ids"] == sorted(str(d) for d in selection)
    assert not Job.objects.filter(workflow_name="MultiNodeBurnInCollectiveWorkflow").exists()


def test_a_passed_rack_is_already_satisfied_unless_mode_all(bearer, world):
    AcceptancePolicy.objects.filter(id=world.policy.id).update(auto_accept=False)  # certified devices stay eligible
    world.pass_single_node()
    world.result(world.rack_nccl, topology=world.rack)
    world.sweep()
    client = bearer(SCOPE)
    body = dispatch(client, world, [d.id for d in world.devices], preview=True)
    assert reasons(body)[("rack-nccl", "already_satisfied")] == ids(*world.devices)
    everything = dispatch(client, world, [d.id for d in world.devices], mode="all")
    workflows = Counter(j["workflow_name"] for j in everything["created_jobs"])
    assert workflows == {"SingleNodeBurnInWorkflow": 4}  # single-node reruns take the devices first
    assert reasons(everything)[("rack-nccl", "topology_cohort_blocked")] == ids(*world.devices)


# --- the request ---------------------------------------------------------------------------------


def test_ids_not_at_the_site_are_400_with_their_paths_and_nothing_is_created(bearer, world, fleet):
    world.sweep()
    elsewhere = fleet.device(fleet.satellite(fleet.site("par-1"), "sat-p"))
    unknown = uuid.uuid4()
    response = bearer(SCOPE).post(
        f"/api/v1/burn-in/sites/{world.site.id}/rerun-plans/dispatch/",
        {"device_ids": [str(world.devices[0].id), str(elsewhere.id), str(unknown)]},
        format="json",
    )
    assert response.status_code == 400
    assert [e["field"] for e in response.json()["field_errors"]] == ["device_ids.1", "device_ids.2"]
    assert Job.objects.count() == 0


def test_an_unknown_site_is_404(bearer, db):
    response = bearer(SCOPE).post(
        f"/api/v1/burn-in/sites/{uuid.uuid4()}/rerun-plans/dispatch/",
        {"device_ids": [str(uuid.uuid4())]},
        format="json",
    )
    assert response.status_code == 404 and response.json()["code"] == "not_found"


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"device_ids": []}, "device_ids"),
        ({"device_ids": ["nope"]}, "device_ids.0"),
        ({"device_ids": [str(uuid.uuid4())], "mode": "some"}, "mode"),
        ({}, "device_ids"),
    ],
)
def test_malformed_requests_name_the_field(bearer, world, body, field):
    response = bearer(SCOPE).post(f"/api/v1/burn-in/sites/{world.site.id}/rerun-plans/dispatch/", body, format="json")
    assert response.status_code == 400
    assert response.json()["field_errors"][0]["field"] == field


def test_dispatch_needs_job_create(bearer, session_client, world):
    url = f"/api/v1/burn-in/sites/{world.site.id}/rerun-plans/dispatch/"
    body = {"device_ids": [str(world.devices[0].id)]}
    assert bearer(["job:run"]).post(url, body, format="json").status_code == 403
    person = session_client()
    person.get("/accounts/login/")
    csrf = person.cookies["csrftoken"].value
    assert person.post(url, body, format="json", HTTP_X_CSRFTOKEN=csrf).status_code == 403
    allowed = session_client(perms=["jobs.add_job"], username="lead")
    allowed.get("/accounts/login/")
    assert (
        allowed.post(url, body, format="json", HTTP_X_CSRFTOKEN=allowed.cookies["csrftoken"].value).status_code == 200
    )


def test_the_same_state_gives_the_same_response(bearer, world, fleet):
    world.sweep()
    fleet.device(world.satellite, "gpu.mi300x.8x")
    client = bearer(SCOPE)
    selection = [d.id for d in reversed(world.devices)]
    assert dispatch(client, world, selection, preview=True) == dispatch(client, world, selection[::-1], preview=True)


def test_dispatch_query_count_is_the_same_for_10_and_200_devices(bearer, fleet):
    world = World(fleet, devices=0)
    racks = [fleet.topology(world.satellite, "rack", f"rack-{i:02d}") for i in range(21)]
    devices = [fleet.device(world.satellite, topologies=[racks[i // 10]]) for i in range(210)]
    world.sweep()
    client = bearer(SCOPE)
    dispatch(client, world, [devices[-1].id])

    def measure(selection):
        with CaptureQueriesContext(connection) as queries:
            body = dispatch(client, world, [d.id for d in selection])
        return len(queries), body

    small, small_body = measure(devices[:10])
    large, large_body = measure(devices[10:210])
    assert len(small_body["created_jobs"]) == 10 and len(large_body["created_jobs"]) == 199
    assert small == large


@pytest.mark.django_db(transaction=True)
def test_sixteen_concurrent_overlapping_dispatches_never_double_book_a_device(fleet, bearer):
    world = World(fleet, devices=12, rack_requirement=False)
    from fleet.policies.models import Requirement

    Requirement.objects.filter(name="nvbw").delete()  # one requirement: each device appears once
    world.sweep()
    clients = [bearer(SCOPE, name=f"op-{i}") for i in range(16)]
    selections = [[world.devices[(i + k) % 12].id for k in range(5)] for i in range(16)]
    responses: dict[int, dict] = {}
    errors: list[BaseException] = []
    start = threading.Barrier(16)

    def run(i):
        try:
            start.wait(10)
            responses[i] = dispatch(clients[i], world, selections[i])
        except BaseException as exc:
            errors.append(exc)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=run, args=(i,)) for i in range(16)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert not errors, errors
    held = Counter(JobDevice.objects.filter(active=True).values_list("device_id", flat=True))
    assert held and max(held.values()) == 1
    assert sorted(map(str, held)) == ids(*world.devices)
    for i, body in responses.items():
        seen = [d for j in body["created_jobs"] for d in j["device_ids"]]
        seen += [d for g in body["skips"] for d in g["device_ids"]]
        assert sorted(seen) == sorted(str(d) for d in selections[i]), i
        assert {g["reason"] for g in body["skips"]} <= {"already_dispatched"}
    assert sum(len(b["created_jobs"]) for b in responses.values()) == 12


# --- the command -------------------------------------------------------------------------------


def test_fleet_rerun_dry_run_and_dispatch_by_topology_and_by_failure(world):
    world.result(world.diag, device=world.devices[1], passed=False)
    world.sweep()
    out = io.StringIO()
    call_command("rerun", "--site", "lon-1", "--topology", "rack-a01", "--dry-run", stdout=out)
    assert "dry run" in out.getvalue() and "4 job(s) planned" in out.getvalue()
    assert Job.objects.count() == 0
    out = io.StringIO()
    call_command("rerun", "--site", "lon-1", "--all-failed", stdout=out)
    assert "1 job(s) created" in out.getvalue() and "a01-n01" in out.getvalue()
    assert list(JobDevice.objects.values_list("device__hostname", flat=True)) == ["a01-n01"]
    out = io.StringIO()
    call_command("rerun", "--site", "lon-1", "--device", "a01-n01", "a01-n02", stdout=out)
    assert "already_dispatched" in out.getvalue()


def test_fleet_rerun_says_what_failed_when_nothing_can_be_planned(world):
    world.result(world.diag, device=world.devices[1], passed=False)
    world.sweep()
    call_command("rerun", "--site", "lon-1", "--all-failed", stdout=io.StringIO())  # the rerun is now queued
    out = io.StringIO()
    call_command("rerun", "--site", "lon-1", "--all-failed", "--dry-run", stdout=out)
    text = out.getvalue()
    assert "Jobs that would be created" not in text  # no empty table
    assert "already_dispatched: an active job already covers it" in text
    assert "Nothing can be dispatched now. What is failing in the selection:" in text
    assert "a01-n01 gpu-diag (failed, attempt 0)" in text
