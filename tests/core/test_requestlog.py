"""Request ids, log lines and the probes, in-process: the id is echoed and on every line of its
request, a 500's line has the traceback and the id while its body has neither, no secret is
logged, and /healthz, /readyz, /metrics answer whatever the Host header and HTTPS settings."""

from __future__ import annotations

import json
import logging

import pytest

from fleet.core import probes
from fleet.core.logs import JsonLines
from tests.conftest import CLIENT_SECRET
from tests.schema_validation import ValidatingAPIClient

HEARTBEAT = "/api/v1/satellites/heartbeat/"


def lines(caplog, logger: str) -> list[dict]:
    formatter = JsonLines()
    return [json.loads(formatter.format(r)) for r in caplog.records if r.name == logger]


def test_the_request_id_is_echoed_and_on_the_requests_line(fleet, bearer, caplog):
    satellite = fleet.satellite(fleet.site("lon-1"), "sat-a")
    client = bearer(["job:run"], satellite=satellite)
    with caplog.at_level(logging.INFO, logger="fleet.request"):
        response = client.post(
            HEARTBEAT,
            {"site_slug": "lon-1", "satellite_name": "sat-a", "workflows": []},
            format="json",
            HTTP_X_REQUEST_ID="lb-7f3a9",
        )
    assert response.status_code == 200 and response["X-Request-ID"] == "lb-7f3a9"
    [line] = [line for line in lines(caplog, "fleet.request") if line["request_id"] == "lb-7f3a9"]
    assert line["operation"] == "api_v1_satellites_heartbeat_create"
    assert line["principal"] == "satellite:lon-1/sat-a"
    assert (line["status"], line["method"], line["path"]) == (200, "POST", HEARTBEAT)
    assert line["duration_ms"] >= 0 and line["level"] == "INFO" and "time" in line


@pytest.mark.parametrize("given", [None, "has spaces", "x" * 129, "new\nline"])
def test_a_missing_or_unusable_request_id_is_replaced(db, given):
    extra = {} if given is None else {"HTTP_X_REQUEST_ID": given}
    response = ValidatingAPIClient().get("/healthz", **extra)
    assert response.status_code == 200
    assert response["X-Request-ID"] != given and len(response["X-Request-ID"]) == 32


def test_a_500_logs_the_traceback_with_the_id_and_its_body_has_neither(fleet, bearer, monkeypatch, caplog):
    fleet.satellite(fleet.site("lon-1"), "sat-a")

    def explode(**kwargs):
        raise RuntimeError("internal detail that must not leak")

    monkeypatch.setattr("fleet.inventory.api.views.satellite_heartbeat_record", explode)
    client = bearer(["job:run"])
    client.server_error_expected = True
    response = client.post(
        HEARTBEAT,
        {"site_slug": "lon-1", "satellite_name": "sat-a", "workflows": []},
        format="json",
        HTTP_X_REQUEST_ID="req-500",
    )
    assert response.status_code == 500 and response["X-Request-ID"] == "req-500"
    body = response.content.decode()
    assert "req-500" not in body and "Traceback" not in body and "internal detail" not in body
    [error] = lines(caplog, "fleet.errors")
    assert error["request_id"] == "req-500" and error["operation"] == "api_v1_satellites_heartbeat_create"
    assert "Traceback" in error["exc_info"] and "internal detail that must not leak" in error["exc_info"]
    [line] = lines(caplog, "fleet.request")[-1:]
    assert (line["request_id"], line["status"], line["error_code"]) == ("req-500", 500, "error")


def test_no_token_secret_or_body_reaches_the_log(fleet, oauth_client, caplog):
    import base64

    app = oauth_client("automation")
    client = ValidatingAPIClient()
    basic = base64.b64encode(f"{app.client_id}:{CLIENT_SECRET}".encode()).decode()
    with caplog.at_level(logging.DEBUG):
        token = client.post(
            "/o/token/",
            {"grant_type": "client_credentials", "scope": "fleet:read"},
            format="multipart",
            HTTP_AUTHORIZATION=f"Basic {basic}",
        ).json()["access_token"]
        client.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
        assert client.get("/api/v1/sites/?site_slug=secret-query").status_code == 200
    text = "\n".join(JsonLines().format(r) for r in caplog.records)
    assert "fleet.request" in text
    for secret in (CLIENT_SECRET, token, basic, "secret-query"):
        assert secret not in text


def test_probes_answer_whatever_the_host_and_https_settings(db, settings):
    settings.ALLOWED_HOSTS = ["fleet.example.com"]
    settings.SECURE_SSL_REDIRECT = True
    client = ValidatingAPIClient()
    for path in ("/healthz", "/readyz", "/metrics"):
        response = client.get(path, HTTP_HOST="10.1.2.3:8000")
        assert response.status_code == 200, (path, response.status_code)
    assert client.get("/api/v1/sites/", HTTP_HOST="10.1.2.3:8000").status_code == 400  # the rest stays guarded
    assert client.get("/healthz").json() == {"status": "ok"}
    assert client.get("/readyz").json() == {"status": "ready"}
    refused = client.post("/healthz")
    assert refused.status_code == 405 and refused.json()["code"] == "method_not_allowed"


def test_readyz_is_503_until_every_migration_is_applied(db, monkeypatch):
    expected = probes.expected_migrations() | {("burnin", "9999_not_yet")}
    monkeypatch.setattr(probes, "expected_migrations", lambda: expected)
    response = ValidatingAPIClient().get("/readyz")
    assert response.status_code == 503 and response["Retry-After"] == "5"
    body = response.json()
    assert body["code"] == "service_unavailable" and "burnin.9999_not_yet" in body["detail"]
