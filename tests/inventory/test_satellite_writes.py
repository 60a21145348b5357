"""Which satellite may write which device: the whole matrix, every satellite write endpoint ×
(its own device, a device another satellite serves at the same site, a device of another site, its
own decommissioned device). The endpoints are read from the URL conf (through the generated schema:
every unsafe operation a satellite's scopes can call), so a new one without a row here fails.

The rule is one (`fleet.inventory.identity.ensure_reaches`): a satellite writes only what it
serves — devices it manages that are not decommissioned, topologies it manages, and its own jobs,
heartbeat and projection scopes. A refusal is a 403 in the error schema (a batch of evaluation
results counts the item `invalid`, as the seed spec says) and writes nothing.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any
from uuid import uuid4

import pytest
from django.utils import timezone

from fleet.burnin.models import EvaluationResult, FingerprintSnapshot, TestExecution
from fleet.inventory.identity import SATELLITE_SCOPES
from fleet.jobs.models import Job
from fleet.jobs.services import JobSpec, job_create
from fleet_rules.vocabulary import DeviceState, JobStatus, WorkflowName
from tests.builders import result_item
from tests.payloads import inventory
from tests.reliability.test_authz_matrix import schema_operations

RC = "gpu.h200.8x"
OWN, SAME_SITE, OTHER_SITE, DECOMMISSIONED = "own device", "same-site other satellite", "other site", "decommissioned"
CASES = (OWN, SAME_SITE, OTHER_SITE, DECOMMISSIONED)


@dataclass
class World:
    west: Any  # the caller
    devices: dict[str, Any]  # by case
    requirement: Any
    key: dict[str, str]  # source key by site slug
    jobs: dict[str, Any]  # a running job of the case device's satellite (None: none can exist)


@pytest.fixture
def world(fleet) -> World:
    lon, ams = fleet.site("lon-1"), fleet.site("ams-1")
    workflows = list(WorkflowName.values)
    west = fleet.satellite(lon, "west", workflows=workflows)
    east = fleet.satellite(lon, "east", workflows=workflows)
    north = fleet.satellite(ams, "north", workflows=workflows)
    devices = {
        OWN: fleet.device(west, RC, hostname="w-01"),
        SAME_SITE: fleet.device(east, RC, hostname="e-01"),
        OTHER_SITE: fleet.device(north, RC, hostname="n-01"),
        DECOMMISSIONED: fleet.device(west, RC, hostname="w-02", state=DeviceState.DECOMMISSIONED),
    }
    policy = fleet.policy(RC)
    diag = fleet.requirement(policy, "gpu-diag")
    jobs = {}
    for case in (OWN, SAME_SITE, OTHER_SITE):
        device = devices[case]
        jobs[case] = job_create(
            spec=JobSpec(
                site_id=device.site_id,
                satellite_id=device.satellite_id,
                workflow_name=WorkflowName.SINGLE_NODE,
                device_ids=(device.id,),
            ),
            requested_by="test",
        )
    Job.objects.filter(id__in=[j.id for j in jobs.values()]).update(
        status=JobStatus.RUNNING, claimed_at=timezone.now(), lease_expires_at=timezone.now() + timedelta(hours=1)
    )
    keys = {site.slug: fleet.source_key(diag, site) for site in (lon, ams)}
    return World(west, devices, diag, keys, jobs)


def _names(device) -> dict[str, str]:
    return {"site_slug": device.site.slug, "satellite_name": device.satellite.name}


# --- one request per endpoint, aimed at the case's device --------------------------------------


def _execution_put(w: World, case: str, fleet) -> tuple[str, str, dict]:
    device = w.devices[case]
    body = {
        "requirement": "gpu-diag",
        "device_id": str(device.id),
        "status": "completed",
        "metrics": {"diag_failed_tests": {"value": 0}},
        "started_at": "2026-11-30T10:00:00Z",
        "finished_at": "2026-11-30T10:30:00Z",
        "inventory": inventory(),
        "health": {
            "window": {"since": "2026-11-30T10:00:00Z", "until": "2026-11-30T10:30:00Z"},
            "source": "journalctl",
            "xid_events": [
                {
                    "kind": "xid",
                    "code": 79,
                    "pci_bus_id": "0000:3b:00",
                    "message": "fell off",
                    "at": "2026-11-30T10:12:00Z",
                }
            ],
        },
    }
    return "PUT", f"/api/v1/burn-in/executions/{uuid4()}/", body


def _evaluation_results(w: World, case: str, fleet) -> tuple[str, str, dict]:
    device = w.devices[case]
    execution = fleet.execution(w.requirement, device=device)
    return (
        "POST",
        "/api/v1/burn-in/evaluations/results/",
        {"results": [result_item(execution, w.key[device.site.slug])]},
    )


def _reconcile(w: World, case: str, fleet) -> tuple[str, str, dict]:
    return "POST", "/api/v1/burn-in/policy-progress/reconcile/", _names(w.devices[case]) | {"resource_class": RC}


def _fingerprints(w: World, case: str, fleet) -> tuple[str, str, dict]:
    device = w.devices[case]
    # The caller names itself and the device by hostname; another site's device is reached by
    # naming that site's satellite (the caller's own site has no such hostname).
    names = _names(device) if case == OTHER_SITE else _names(w.devices[OWN])
    return (
        "POST",
        "/api/v1/satellites/fingerprints/",
        names | {"devices": [{"hostname": device.hostname, "inventory": inventory()}]},
    )


def _claim(w: World, case: str, fleet) -> tuple[str, str, dict]:
    return "POST", "/api/v1/jobs/claim/", _names(w.devices[case])


def _job_heartbeat(w: World, case: str, fleet) -> tuple[str, str, dict]:
    return "POST", f"/api/v1/jobs/{w.jobs[case].id}/heartbeat/", {}


def _job_finish(w: World, case: str, fleet) -> tuple[str, str, dict]:
    return "POST", f"/api/v1/jobs/{w.jobs[case].id}/finish/", {"status": "succeeded"}


def _satellite_heartbeat(w: World, case: str, fleet) -> tuple[str, str, dict]:
    return (
        "POST",
        "/api/v1/satellites/heartbeat/",
        _names(w.devices[case]) | {"workflows": [{"name": "SingleNodeBurnInWorkflow", "version": "1"}]},
    )


#: What each endpoint answers the caller for each case: a status, `invalid` (a batch item refused:
#: 200, nothing written), or None where the case cannot be asked (the reason beside it).
NAMES_A_SATELLITE = "names a satellite, not a device"
NO_JOB = "no job can hold a decommissioned device"
MATRIX: dict[tuple[str, str], tuple[Callable[..., tuple[str, str, dict]], dict[str, int | str | None]]] = {
    ("PUT", "/api/v1/burn-in/executions/{execution_id}/"): (
        _execution_put,
        {OWN: 201, SAME_SITE: 403, OTHER_SITE: 403, DECOMMISSIONED: 403},
    ),
    # An evaluation judges evidence already stored against the thresholds: a decommissioned
    # device's execution may still be judged by the satellite that ran it (it moves nothing).
    ("POST", "/api/v1/burn-in/evaluations/results/"): (
        _evaluation_results,
        {OWN: "written", SAME_SITE: "invalid", OTHER_SITE: "invalid", DECOMMISSIONED: "written"},
    ),
    ("POST", "/api/v1/satellites/fingerprints/"): (
        _fingerprints,
        {OWN: 200, SAME_SITE: 403, OTHER_SITE: 403, DECOMMISSIONED: 403},
    ),
    ("POST", "/api/v1/burn-in/policy-progress/reconcile/"): (
        _reconcile,
        {OWN: 200, SAME_SITE: 403, OTHER_SITE: 403, DECOMMISSIONED: None},
    ),
    ("POST", "/api/v1/jobs/claim/"): (_claim, {OWN: 200, SAME_SITE: 403, OTHER_SITE: 403, DECOMMISSIONED: None}),
    ("POST", "/api/v1/jobs/{id}/heartbeat/"): (
        _job_heartbeat,
        {OWN: 200, SAME_SITE: 403, OTHER_SITE: 403, DECOMMISSIONED: None},
    ),
    ("POST", "/api/v1/jobs/{id}/finish/"): (
        _job_finish,
        {OWN: 200, SAME_SITE: 403, OTHER_SITE: 403, DECOMMISSIONED: None},
    ),
    ("POST", "/api/v1/satellites/heartbeat/"): (
        _satellite_heartbeat,
        {OWN: 200, SAME_SITE: 403, OTHER_SITE: 403, DECOMMISSIONED: None},
    ),
}
NOT_ASKED = {
    ("POST", "/api/v1/burn-in/policy-progress/reconcile/"): NAMES_A_SATELLITE,
    ("POST", "/api/v1/jobs/claim/"): NAMES_A_SATELLITE,
    ("POST", "/api/v1/satellites/heartbeat/"): NAMES_A_SATELLITE,
    ("POST", "/api/v1/jobs/{id}/heartbeat/"): NO_JOB,
    ("POST", "/api/v1/jobs/{id}/finish/"): NO_JOB,
}


def satellite_write_operations() -> set[tuple[str, str]]:
    """Every unsafe operation of the URL conf a satellite's client can hold the scopes for."""
    return {
        (o.method, o.template)
        for o in schema_operations()
        if o.method not in ("GET", "HEAD", "OPTIONS") and o.scopes and set(o.scopes) <= set(SATELLITE_SCOPES)
    }


def test_every_satellite_write_endpoint_has_a_row_in_the_matrix():
    found = satellite_write_operations()
    assert found == set(MATRIX), (
        f"endpoints without a row: {found - set(MATRIX)}; rows without one: {set(MATRIX) - found}"
    )
    for key, (_, cells) in MATRIX.items():
        assert set(cells) == set(CASES), key
        assert (None in cells.values()) == (key in NOT_ASKED), key


def _outcome(response) -> int | str:
    if response.status_code == 200 and "invalid" in response.json():
        body = response.json()
        return "invalid" if (body["invalid"], body["written"]) == (1, 0) else "written"
    return response.status_code


def _written(w: World, case: str) -> tuple[int, int, int]:
    device = w.devices[case]
    return (
        TestExecution.objects.filter(device=device).count(),
        FingerprintSnapshot.objects.filter(device=device).count(),
        EvaluationResult.objects.filter(execution__device=device).count(),
    )


#: Every cell that can be asked: (endpoint, case).
CELLS = [
    (endpoint, case) for endpoint, (_, cells) in sorted(MATRIX.items()) for case in CASES if cells[case] is not None
]


@pytest.mark.parametrize(("endpoint", "case"), CELLS, ids=[f"{e[0]} {e[1]} | {c}" for e, c in CELLS])
def test_a_satellite_writes_only_what_it_serves(world, fleet, bearer, endpoint, case):
    make, cells = MATRIX[endpoint]
    want = cells[case]
    client = bearer(SATELLITE_SCOPES, satellite=world.west)
    method, path, body = make(world, case, fleet)
    before = _written(world, case)

    response = getattr(client, method.lower())(path, body, format="json")

    got = _outcome(response)
    assert got == want, (endpoint, case, response.content[:400])
    if response.status_code == 403:
        assert response.json()["code"] == "permission_denied"
    if want in (403, "invalid"):
        assert _written(world, case) == before, "a refused write left rows behind"


def test_a_collective_execution_is_reported_only_by_the_satellite_managing_its_topology(fleet, bearer, world):
    east = world.devices[SAME_SITE].satellite
    rack = fleet.topology(east, "rack", "rack-e01")
    fleet.requirement(world.requirement.policy, "rack-nccl", scope="multi_node", unit="rack", test="nccl-multi")
    from fleet.inventory.models import TopologyMembership

    TopologyMembership.objects.create(device=world.devices[SAME_SITE], topology=rack, unit="rack")
    body = {
        "requirement": "rack-nccl",
        "topology_id": str(rack.id),
        "status": "running",
        "metrics": {},
        "started_at": "2026-11-30T10:00:00Z",
    }

    refused = bearer(SATELLITE_SCOPES, satellite=world.west, name="west").put(
        f"/api/v1/burn-in/executions/{uuid4()}/", body, format="json"
    )
    served = bearer(SATELLITE_SCOPES, satellite=east, name="east").put(
        f"/api/v1/burn-in/executions/{uuid4()}/", body, format="json"
    )

    assert (refused.status_code, refused.json()["code"]) == (403, "permission_denied"), refused.content
    assert served.status_code == 201, served.content
    assert TestExecution.objects.filter(topology=rack).count() == 1


def test_an_execution_of_its_own_device_cannot_be_filed_under_another_satellites_job(world, bearer):
    """A job's executions end with the job (`executions_abandon`) and count for its diagnosis: a
    satellite files its executions only under its own jobs."""
    body = {
        "requirement": "gpu-diag",
        "device_id": str(world.devices[OWN].id),
        "job_id": str(world.jobs[SAME_SITE].id),
        "status": "running",
        "metrics": {},
        "started_at": "2026-11-30T10:00:00Z",
    }
    client = bearer(SATELLITE_SCOPES, satellite=world.west)

    refused = client.put(f"/api/v1/burn-in/executions/{uuid4()}/", body, format="json")
    served = client.put(
        f"/api/v1/burn-in/executions/{uuid4()}/", body | {"job_id": str(world.jobs[OWN].id)}, format="json"
    )

    assert (refused.status_code, refused.json()["code"]) == (403, "permission_denied"), refused.content
    assert served.status_code == 201, served.content
    assert TestExecution.objects.filter(device=world.devices[OWN]).count() == 1
