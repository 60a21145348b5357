"""PUT /api/v1/burn-in/executions/{id}/: idempotent reporting by the agent's id."""

from __future__ import annotations

import uuid
from urllib.parse import urlencode

import pytest

from fleet.burnin.models import TestExecution

URL = "/api/v1/burn-in/executions/{}/"


@pytest.fixture
def setting(fleet):
    site = fleet.site("lon-1")
    satellite = fleet.satellite(site, "sat-a")
    rack = fleet.topology(satellite, "rack", "rack-a01")
    device = fleet.device(satellite, topologies=[rack])
    policy = fleet.policy()
    diag = fleet.requirement(policy, "gpu-diag", test="dcgm-diag")
    rack_nccl = fleet.requirement(policy, "rack-nccl", scope="multi_node", unit="rack", test="nccl-multi")
    return site, satellite, rack, device, diag, rack_nccl


def body(device, **overrides):
    data = {
        "requirement": "gpu-diag",
        "device_id": str(device.id),
        "status": "running",
        "parameters": {"level": 3},
        "metrics": {},
        "started_at": "2026-11-30T10:00:00Z",
    }
    return data | overrides


def test_first_report_creates_and_an_identical_replay_changes_nothing(bearer, setting):
    *_, device, _, _ = setting
    client = bearer(["test-execution:report"])
    execution_id = uuid.uuid4()
    created = client.put(URL.format(execution_id), body(device), format="json")
    assert created.status_code == 201, created.content
    replay = client.put(URL.format(execution_id), body(device), format="json")
    assert replay.status_code == 200
    assert replay.json()["updated_at"] == created.json()["updated_at"]
    assert TestExecution.objects.count() == 1


def test_every_real_change_moves_updated_at_forward(bearer, setting):
    *_, device, _, _ = setting
    client = bearer(["test-execution:report"])
    execution_id = uuid.uuid4()
    stamps = [client.put(URL.format(execution_id), body(device), format="json").json()["updated_at"]]
    finished = body(
        device,
        status="completed",
        finished_at="2026-11-30T10:30:00Z",
        metrics={"diag_failed_tests": {"value": 0, "unit": "tests"}},
    )
    stamps.append(client.put(URL.format(execution_id), finished, format="json").json()["updated_at"])
    stamps.append(client.put(URL.format(execution_id), finished, format="json").json()["updated_at"])
    corrected = finished | {"metrics": {"diag_failed_tests": {"value": 1, "unit": "tests"}}}
    stamps.append(client.put(URL.format(execution_id), corrected, format="json").json()["updated_at"])
    assert stamps[0] < stamps[1] == stamps[2] < stamps[3]


def test_a_finished_execution_cannot_go_back_to_running(bearer, setting):
    *_, device, _, _ = setting
    client = bearer(["test-execution:report"])
    execution_id = uuid.uuid4()
    client.put(
        URL.format(execution_id), body(device, status="completed", finished_at="2026-11-30T10:30:00Z"), format="json"
    )
    response = client.put(URL.format(execution_id), body(device), format="json")
    assert response.status_code == 400
    assert response.json()["field_errors"][0]["field"] == "status"
    assert TestExecution.objects.get().status == "completed"


def test_the_requirement_can_be_named_by_its_test_and_topologies_report_multi_node(bearer, setting):
    _, _, rack, device, _, rack_nccl = setting
    client = bearer(["test-execution:report"])
    single = client.put(
        URL.format(uuid.uuid4()), {"test": "dcgm-diag", "device_id": str(device.id), "status": "running"}, format="json"
    )
    assert single.status_code == 201 and single.json()["requirement"] == "gpu-diag"
    multi = client.put(
        URL.format(uuid.uuid4()),
        {"requirement": "rack-nccl", "topology_id": str(rack.id), "status": "running"},
        format="json",
    )
    assert multi.status_code == 201, multi.content
    assert multi.json()["topology"] == str(rack.id)


@pytest.mark.parametrize(
    ("overrides", "field"),
    [
        ({"requirement": "no-such-requirement"}, "requirement"),
        ({"device_id": str(uuid.UUID(int=7))}, "device_id"),
        ({"status": "exploded"}, "status"),
        ({"status": True}, "status"),
        ({"metrics": {"bw": {"value": [1, 2]}}}, "metrics.bw.value"),
        ({"metrics": {"bw": {"statistics": {"min": "fast"}}}}, "metrics.bw.statistics.min"),
        ({"parameters": [1, 2]}, "parameters"),
        ({"started_at": "yesterday"}, "started_at"),
        ({"job_id": str(uuid.UUID(int=9))}, "job_id"),
        ({"finished_at": "2026-11-30T09:00:00Z", "status": "completed"}, "finished_at"),
    ],
)
def test_bad_reports_name_the_wrong_field_and_write_nothing(bearer, setting, overrides, field):
    *_, device, _, _ = setting
    client = bearer(["test-execution:report"])
    response = client.put(URL.format(uuid.uuid4()), body(device, **overrides), format="json")
    assert response.status_code == 400, response.content
    assert field in {e["field"] for e in response.json()["field_errors"]}
    assert TestExecution.objects.count() == 0


@pytest.mark.parametrize("media", ["multipart", "form"])
@pytest.mark.parametrize("parameters", ['{"metric\\u0000name": 1}', '{"level": "3\\u0000"}', '{"level": "\\ud800"}'])
def test_json_text_in_a_form_field_that_postgresql_cannot_store_is_a_400_naming_it(bearer, setting, media, parameters):
    """A form-encoded report carries `parameters` as JSON text, decoded by the field, not by the
    JSON body parser that refuses NUL and lone surrogates: the field refuses them too (the slow
    schema fuzz found the 500: `\\u0000 cannot be converted to text`)."""
    *_, device, _, _ = setting
    client = bearer(["test-execution:report"])
    fields = {"requirement": "gpu-diag", "device_id": str(device.id), "status": "running", "parameters": parameters}
    if media == "multipart":
        response = client.put(URL.format(uuid.uuid4()), fields, format="multipart")
    else:
        encoded = urlencode(fields)
        response = client.generic("PUT", URL.format(uuid.uuid4()), encoded, "application/x-www-form-urlencoded")
    assert response.status_code == 400, response.content
    assert [e["field"] for e in response.json()["field_errors"]] == ["parameters"]
    assert TestExecution.objects.count() == 0


def test_giving_both_or_neither_target_is_refused(bearer, setting):
    _, _, rack, device, _, _ = setting
    client = bearer(["test-execution:report"])
    both = client.put(URL.format(uuid.uuid4()), body(device, topology_id=str(rack.id)), format="json")
    neither = client.put(URL.format(uuid.uuid4()), {"requirement": "gpu-diag", "status": "running"}, format="json")
    assert both.status_code == neither.status_code == 400
    assert both.json()["field_errors"][0]["field"] == "device_id"


def test_a_satellite_token_reports_only_for_its_own_site(bearer, setting, fleet):
    *_, device, _, _ = setting
    elsewhere = fleet.satellite(fleet.site("par-1"), "sat-p")
    client = bearer(["test-execution:report"], satellite=elsewhere)
    response = client.put(URL.format(uuid.uuid4()), body(device), format="json")
    assert response.status_code == 403 and response.json()["code"] == "permission_denied"
    assert TestExecution.objects.count() == 0


def test_reporting_needs_the_report_scope(bearer, setting):
    *_, device, _, _ = setting
    client = bearer(["test-execution:evaluate"])
    assert client.put(URL.format(uuid.uuid4()), body(device), format="json").status_code == 403


def test_an_execution_can_be_read_back(bearer, setting):
    *_, device, _, _ = setting
    execution_id = uuid.uuid4()
    bearer(["test-execution:report"]).put(URL.format(execution_id), body(device), format="json")
    reader = bearer(["fleet:read"], name="reader")
    response = reader.get(URL.format(execution_id))
    assert response.status_code == 200 and response.json()["status"] == "running"
    assert reader.get(URL.format(uuid.uuid4())).status_code == 404
