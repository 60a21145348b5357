"""Every error under /api/ is the uniform ErrorResponse: status, code, body shape, no traceback."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from django.test import RequestFactory
from rest_framework.settings import api_settings

from fleet.core import errors
from tests.helpers import REPO

HEARTBEAT = "/api/v1/satellites/heartbeat/"


def assert_error(response, status: int, code: str) -> dict:
    assert response.status_code == status, response.content
    assert response["Content-Type"].startswith("application/json")
    body = response.json()
    assert set(body) == {"detail", "code", "field_errors"}
    assert body["code"] == code
    assert isinstance(body["detail"], str) and body["detail"]
    assert "Traceback" not in response.content.decode()
    return body


@pytest.fixture
def site_with_satellite(fleet):
    site = fleet.site("lon-1")
    return fleet.satellite(site, "sat-a")


def test_invalid_body_lists_every_field_by_dotted_path(bearer, site_with_satellite):
    client = bearer(["job:run"])
    response = client.post(
        HEARTBEAT,
        {"site_slug": "bad slug!", "workflows": [{"name": "ok"}, {"version": "2"}]},
        format="json",
    )
    body = assert_error(response, 400, "invalid")
    fields = {e["field"]: e["messages"] for e in body["field_errors"]}
    assert set(fields) == {"site_slug", "satellite_name", "workflows.1.name"}
    assert all(messages for messages in fields.values())


def test_whole_row_error_is_reported_on_the_row_path():
    body = errors.validation_error_body({"results": [{}, {}, {}, {"non_field_errors": ["row is wrong"]}]})
    assert body["field_errors"] == [{"field": "results.3", "messages": ["row is wrong"]}]


def test_malformed_json_is_a_parse_error(bearer, site_with_satellite):
    client = bearer(["job:run"])
    response = client.post(HEARTBEAT, data="{not json", content_type="application/json")
    body = assert_error(response, 400, "parse_error")
    assert body["field_errors"] == []


def test_text_plain_is_unsupported_media_type(bearer, site_with_satellite):
    client = bearer(["job:run"])
    response = client.post(HEARTBEAT, data="hello", content_type="text/plain")
    assert_error(response, 415, "unsupported_media_type")


def test_unacceptable_accept_header_is_406(bearer):
    client = bearer(["fleet:read"])
    response = client.get("/api/v1/sites/", HTTP_ACCEPT="application/xml")
    assert_error(response, 406, "not_acceptable")


def test_wrong_method_is_405(bearer):
    client = bearer(["fleet:read"])
    assert_error(client.delete("/api/v1/auth/whoami/"), 405, "method_not_allowed")


@pytest.mark.parametrize(
    "path",
    [
        "/api/v1/no-such-thing/",
        "/api/nothing",
        "/api/v1/devices/not-a-uuid/",
        "/api/v1/devices/00000000-0000-0000-0000-000000000000/",
    ],
)
def test_unknown_urls_and_objects_are_json_404(bearer, path):
    client = bearer(["fleet:read"])
    assert_error(client.get(path), 404, "not_found")


def test_no_credentials_is_401_with_bearer_challenge(api):
    response = api.get("/api/v1/sites/")
    assert_error(response, 401, "not_authenticated")
    assert response["WWW-Authenticate"].startswith("Bearer")


def test_malformed_token_is_401_authentication_failed(api, db):
    api.credentials(HTTP_AUTHORIZATION="Bearer definitely-not-a-token")
    response = api.get("/api/v1/sites/")
    assert_error(response, 401, "authentication_failed")
    assert response["WWW-Authenticate"].startswith("Bearer")


def test_throttled_is_429_with_retry_after(bearer, settings):
    settings.REST_FRAMEWORK = {
        **settings.REST_FRAMEWORK,
        "DEFAULT_THROTTLE_RATES": {"anon": "1000/min", "client": "2/min"},
    }
    client = bearer(["fleet:read"])
    assert client.get("/api/v1/sites/").status_code == 200
    assert client.get("/api/v1/sites/").status_code == 200
    response = client.get("/api/v1/sites/")
    assert_error(response, 429, "throttled")
    assert int(response["Retry-After"]) > 0
    assert api_settings.DEFAULT_THROTTLE_RATES["client"] == "2/min"


def test_unexpected_exception_is_a_safe_500_and_logged(bearer, site_with_satellite, monkeypatch, caplog):
    def explode(**kwargs):
        raise RuntimeError("internal detail that must not leak")

    monkeypatch.setattr("fleet.inventory.api.views.satellite_heartbeat_record", explode)
    client = bearer(["job:run"])
    client.server_error_expected = True  # the crash is injected above
    response = client.post(HEARTBEAT, {"site_slug": "lon-1", "satellite_name": "sat-a", "workflows": []}, format="json")
    body = assert_error(response, 500, "error")
    assert "internal detail" not in response.content.decode()
    assert body["detail"] == errors.SAFE_500_DETAIL
    assert any("internal detail that must not leak" in (r.exc_text or "") or r.exc_info for r in caplog.records)


def test_django_level_500_under_api_is_json_without_traceback():
    request = RequestFactory().get("/api/v1/sites/")
    try:
        raise RuntimeError("boom")
    except RuntimeError:
        response = errors.handler500(request)
    assert response.status_code == 500
    assert json.loads(response.content) == errors.error_body(errors.SAFE_500_DETAIL, "error")


@pytest.mark.process
def test_database_unreachable_is_503_service_unavailable(tmp_path):
    """A real process whose DATABASE_URL points at a closed port answers 503, not 500."""
    script = (
        "import json, django; django.setup()\n"
        "from django.test import Client\n"
        "client = Client(raise_request_exception=False)\n"
        "client.cookies['sessionid'] = 'a-session-that-needs-the-database'\n"
        "out = []\n"
        "for path, headers in [('/api/v1/sites/', {'HTTP_AUTHORIZATION': 'Bearer abc'}),"
        " ('/api/v1/sites/', {}), ('/admin/', {})]:\n"
        "    r = client.get(path, **headers)\n"
        "    out.append({'status': r.status_code, 'body': r.json(), 'text': r.content.decode()})\n"
        "print(json.dumps(out))\n"
    )
    env = {
        "PATH": "/usr/bin:/bin",
        "DJANGO_SETTINGS_MODULE": "fleet.settings",
        "DATABASE_URL": "postgresql://postgres@127.0.0.1:1/fleet",
        "FLEET_DATA_DIR": str(tmp_path),
        "SECRET_KEY": "x" * 50,
        "FLEET_DB_CONNECT_TIMEOUT": "2",
    }
    result = subprocess.run(
        [sys.executable, "-c", script], env=env, cwd=REPO, capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr
    answers = json.loads(result.stdout.strip().splitlines()[-1])
    assert len(answers) == 3
    for answer in answers:
        assert answer["status"] == 503
        assert answer["body"]["code"] == "service_unavailable"
        assert answer["body"]["field_errors"] == []
        assert "Traceback" not in answer["text"]


@pytest.mark.parametrize(
    ("raw", "where"),
    [
        ('{"site_slug": "lon-1", "satellite_name": "sat-a", "workflows": [], "x": "a\\u0000b"}', "x"),
        ('{"site_slug": "lon-1", "satellite_name": "sat-a", "workflows": [{"name": "\\ud800"}]}', "workflows.0.name"),
        ('{"site_slug": "lon-1", "satellite_name": "sat-a", "workflows": [], "n": 1e999}', "n"),
        ('{"site_slug": "lon-1", "satellite_name": "sat-a", "workflows": [], "\\u0000": 1}', "body (a key)"),
    ],
)
def test_json_postgres_cannot_store_is_a_parse_error_naming_the_place(bearer, site_with_satellite, raw, where):
    client = bearer(["job:run"])
    response = client.post(HEARTBEAT, data=raw, content_type="application/json")
    body = assert_error(response, 400, "parse_error")
    assert where in body["detail"]


@pytest.mark.parametrize("method", ["post", "put", "patch", "delete"])
def test_unsafe_methods_to_unknown_api_urls_are_json_404_not_a_csrf_page(bearer, method):
    client = bearer(["job:run"])
    response = getattr(client, method)("/api/v1/jobs/0.5/cancel/", {}, format="json")
    assert_error(response, 404, "not_found")


def test_a_session_csrf_failure_outside_drf_is_json_under_api(session_client, db):
    client = session_client()
    response = client.post("/api/v1/no-such-endpoint/", {}, format="json")
    assert response.status_code in (403, 404)
    assert response.json()["code"] in ("permission_denied", "not_found")


def test_an_invalid_list_cursor_is_a_400_on_cursor(bearer):
    body = assert_error(bearer(["fleet:read"]).get("/api/v1/devices/?cursor=abc"), 400, "invalid")
    assert body["field_errors"][0]["field"] == "cursor"
