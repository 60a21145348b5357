"""Hostile input, all of it against one seeded database: every case of findings 4 and 8 of issue 11
(and a few neighbours), and issue 27's to the dashboard (NUL in paths and queries, dates it cannot
read, a YAML alias bomb, the password reset that is gone), answers its documented 4xx — the
`ErrorResponse` under /api/, an HTML page naming the problem elsewhere — never a 500, and the whole
run leaves every table exactly as it was (a checksum of each). tests/hardening holds one
regression test per finding; this is the same ground as one inventory, with nothing written."""

from __future__ import annotations

import base64
import html
import json
import sys
from collections.abc import Callable
from uuid import uuid4

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client

from tests.builders import passing_payload, result_item
from tests.reliability.checksums import changed_tables, table_checksums

RESULTS = "/api/v1/burn-in/evaluations/results/"
RECONCILE = "/api/v1/burn-in/policy-progress/reconcile/"
HEARTBEAT = "/api/v1/satellites/heartbeat/"
EXECUTION = "/api/v1/burn-in/executions/{}/"


@pytest.fixture
def scene(fleet, bearer, settings, user_factory):
    site = fleet.site("lon-1")
    satellite = fleet.satellite(site, "sat-a", workflows=["SingleNodeBurnInWorkflow"])
    devices = [fleet.device(satellite) for _ in range(3)]
    policy = fleet.policy("gpu.h200.8x")
    diag = fleet.requirement(policy, "gpu-diag")
    pending = fleet.execution(diag, device=devices[0])
    client = bearer(
        ["fleet:read", "test-execution:report", "test-execution:evaluate", "burn-in-policy-progress:write", "job:run"],
        satellite=satellite,
    )
    person = Client(raise_request_exception=False)  # CSRF not enforced: each POST reaches its view
    person.force_login(user_factory(username="root", superuser=True))
    return {
        "site": site,
        "devices": devices,
        "pending": pending,
        "key": fleet.source_key(diag, site),
        "c": client,
        "person": person,
    }


def alias_bomb(levels: int = 25) -> bytes:
    """Issue 27's 'billion laughs': 2**25 values in under 800 bytes."""
    head = "parameter_profiles:\n- resource_class: gpu.h200.8x\n  test: dcgm-diag\n  parameters:\n"
    body = "    a0: &a0 [x, x]\n" + "".join(f"    a{i}: &a{i} [*a{i - 1}, *a{i - 1}]\n" for i in range(1, levels))
    return (head + body).encode()


def _page_cases(s: dict) -> list[tuple[str, Callable, int, str | None, str | None]]:
    """Issue 27's hostile input to the dashboard and the API's paths and queries: (name, request,
    status, code for an ErrorResponse or None for an HTML page, the field or words it names)."""
    c, person = s["c"], s["person"]
    device = s["devices"][0].hostname
    return [
        ("NUL in an API path", lambda: c.get("/api/v1/devices/a%00b/"), 404, "not_found", None),
        ("NUL in an API query", lambda: c.get("/api/v1/devices/?hostname=a%00b"), 400, "invalid", "hostname"),
        ("NUL as a device's hostname", lambda: person.get("/sites/lon-1/devices/%00/"), 404, None, None),
        (
            "NUL in a certificate's hostname",
            lambda: person.get("/sites/lon-1/devices/a%00b/certificate/"),
            404,
            None,
            None,
        ),
        ("NUL as a requirement", lambda: person.get("/sites/lon-1/metrics/%00/"), 404, None, None),
        ("NUL as the jobs page's site", lambda: person.get("/jobs/?site=%00"), 400, None, "site"),
        ("NUL in a grid filter", lambda: person.get("/sites/lon-1/grid/?topology=a%00b"), 400, None, "topology"),
        (
            "a month 13 on the jobs page",
            lambda: person.get(f"/jobs/?before_at=2020-13-45T00:00:00&before_id={uuid4()}"),
            400,
            None,
            "before_at",
        ),
        ("an unknown job status", lambda: person.get("/jobs/?status=exploded"), 400, None, "status"),
        (
            "a 25-level YAML alias bomb to what-if",
            lambda: person.post("/what-if/", {"candidate": SimpleUploadedFile("bomb.yaml", alias_bomb())}),
            400,
            None,
            "aliases are not allowed (line 5)",
        ),
        ("a password reset", lambda: person.post("/accounts/password_reset/", {"email": "a@b.c"}), 404, None, None),
        ("a device page (control)", lambda: person.get(f"/sites/lon-1/devices/{device}/"), 200, None, device),
    ]


def _cases(s: dict, limit: int) -> list[tuple[str, Callable, int, str, str | None]]:
    """(name, request, status, code, the field it names or None)."""
    c = s["c"]
    item = result_item(s["pending"], s["key"], passing_payload())
    first = c.get("/api/v1/devices/?limit=1").json()["next"].split("cursor=")[1]
    heartbeat = {
        "site_slug": "lon-1",
        "satellite_name": "sat-a",
        "workflows": [{"name": "SingleNodeBurnInWorkflow", "version": "1"}],
    }
    execution = {
        "requirement": "gpu-diag",
        "device_id": str(s["devices"][1].id),
        "status": "completed",
        "parameters": {},
        "started_at": "2026-11-30T10:00:00Z",
        "finished_at": "2026-11-30T10:30:00Z",
    }
    huge = int("9" * 400)

    def raw(path: str, body: str, content_type: str = "application/json", **extra) -> Callable:
        return lambda: c.generic("POST", path, body, content_type=content_type, **extra)

    cases = [
        ("body over the limit (JSON)", raw(RESULTS, '{"results": "' + "x" * limit + '"}'), 413, "invalid", None),
        (
            "body over the limit (form)",
            raw(RESULTS, "results=" + "x" * limit, "application/x-www-form-urlencoded"),
            413,
            "invalid",
            None,
        ),
        (
            "1,001 form fields",
            raw(RESULTS, "&".join(f"f{i}=1" for i in range(1001)), "application/x-www-form-urlencoded"),
            400,
            "invalid",
            None,
        ),
        ("JSON nested 65 deep", raw(RESULTS, '{"results": ' + "[" * 65 + "]" * 65 + "}"), 400, "parse_error", None),
        ("JSON nested 100,000 deep", raw(RESULTS, "[" * 100_000 + "]" * 100_000), 400, "parse_error", None),
        ("not JSON at all", raw(RESULTS, '{"results": [}'), 400, "parse_error", None),
        (
            "NUL in a JSON string",
            raw(RESULTS, json.dumps({"results": [item | {"execution_id": "a\u0000"}]})),
            400,
            "parse_error",
            None,
        ),
        ("a number too large for JSON", raw(HEARTBEAT, '{"site_slug": "lon-1", "x": 1e999}'), 400, "parse_error", None),
        (
            "chunked body without a length (WSGI)",
            raw(RESULTS, "", HTTP_TRANSFER_ENCODING="chunked"),
            411,
            "invalid",
            None,
        ),
        ("text/plain body", raw(RESULTS, "results", "text/plain"), 415, "unsupported_media_type", None),
        ("URL over 4 kB", lambda: c.get("/api/v1/devices/", {"hostname": "h" * 5000}), 414, "invalid", None),
        ("truncated list cursor", lambda: c.get("/api/v1/devices/", {"cursor": first[:-3]}), 400, "invalid", "cursor"),
        (
            "edited list cursor",
            lambda: c.get("/api/v1/devices/", {"cursor": first[:5] + "A" + first[6:]}),
            400,
            "invalid",
            "cursor",
        ),
        (
            "forged unsigned cursor",
            lambda: c.get("/api/v1/burn-in/policy-progress/", {"cursor": base64.b64encode(b"p=x&o=0").decode()}),
            400,
            "invalid",
            "cursor",
        ),
        (
            "cursor of another list",
            lambda: c.get("/api/v1/burn-in/policy-progress/", {"cursor": first}),
            400,
            "invalid",
            "cursor",
        ),
        (
            "forged reconcile cursor",
            lambda: c.post(
                RECONCILE,
                {"site_slug": "lon-1", "satellite_name": "sat-a", "resource_class": "gpu.h200.8x", "cursor": "AAAA"},
                format="json",
            ),
            400,
            "invalid",
            "cursor",
        ),
        (
            "heartbeat agent_version a number",
            lambda: c.post(HEARTBEAT, heartbeat | {"agent_version": 123}, format="json"),
            400,
            "invalid",
            "agent_version",
        ),
        (
            "heartbeat satellite_name a number",
            lambda: c.post(HEARTBEAT, heartbeat | {"satellite_name": 7}, format="json"),
            400,
            "invalid",
            "satellite_name",
        ),
        (
            "heartbeat workflow version a number",
            lambda: c.post(
                HEARTBEAT,
                heartbeat | {"workflows": [{"name": "SingleNodeBurnInWorkflow", "version": 1}]},
                format="json",
            ),
            400,
            "invalid",
            "workflows.0.version",
        ),
        (
            "a 400-digit metric value",
            lambda: c.put(EXECUTION.format(uuid4()), execution | {"metrics": {"m": {"value": huge}}}, format="json"),
            400,
            "invalid",
            "metrics.m.value",
        ),
        (
            "a 400-digit statistic",
            lambda: c.put(
                EXECUTION.format(uuid4()), execution | {"metrics": {"m": {"statistics": {"p99": huge}}}}, format="json"
            ),
            400,
            "invalid",
            "metrics.m.statistics.p99",
        ),
        (
            "passed given as a string",
            raw(
                RESULTS,
                json.dumps({"results": [item | {"evaluation_result": {**passing_payload(), "passed": "true"}}]}),
            ),
            400,
            "invalid",
            "results.0.evaluation_result.passed",
        ),
        (
            "the same execution twice",
            lambda: c.post(RESULTS, {"results": [item, item]}, format="json"),
            400,
            "invalid",
            "results.0.execution_id",
        ),
        (
            "malformed id in a job URL",
            lambda: c.post("/api/v1/jobs/not-a-uuid/finish/", {"status": "succeeded"}, format="json"),
            404,
            "not_found",
            None,
        ),
        ("malformed id in a device URL", lambda: c.get("/api/v1/devices/1%20OR%201=1/"), 404, "not_found", None),
        ("unknown URL under /api/", lambda: c.post("/api/v1/nothing-here/", {}, format="json"), 404, "not_found", None),
    ]
    return cases


def test_every_hostile_request_is_its_documented_4xx_and_nothing_is_written(scene, settings):
    cases = _cases(scene, settings.REQUEST_BOUNDS["MAX_BODY_BYTES"]) + _page_cases(scene)
    before = table_checksums()
    wrong = []
    for name, send, status, code, field in cases:
        response = send()
        if code is None:  # a dashboard page: HTML that names what was wrong
            page = html.unescape(response.content.decode())
            ok = response["Content-Type"].startswith("text/html") and (field is None or field in page)
            body: object = page[:300]
        else:
            body = response.json()
            fields = [e["field"] for e in body["field_errors"]]
            ok = body["code"] == code and (field is None or field in fields)
        if response.status_code != status or not ok:
            wrong.append((name, status, code, field, response.status_code, body))
    after = table_checksums()
    print(f"\nhostile input: {len(cases)} cases, {len(wrong)} deviations", file=sys.stderr)  # noqa: T201
    assert not wrong, "\n".join(map(str, wrong))
    assert changed_tables(before, after) == []
