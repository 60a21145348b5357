"""One regression test (at least) per finding of the hardening issue (#11), each seen failing
on the code before the fix. In-process through the everyday validating clients."""

from __future__ import annotations

import base64
import io
import json
import os
import subprocess
import sys
import time

import psycopg
import pytest
from django.contrib.auth.models import Permission
from django.core.management import CommandError, call_command
from django.db import connection
from django.test import Client
from oauth2_provider.models import Application

from tests import helpers
from tests.conftest import CLIENT_SECRET, client_credentials_app, fetch_token
from tests.core.test_auth import HEARTBEAT, heartbeat_body
from tests.helpers import REPO

# --- 1. OAuth2 surface and operator clients ------------------------------------------------------


@pytest.mark.parametrize(
    "path", ["/o/applications/", "/o/applications/register/", "/o/authorize/", "/o/introspect/", "/o/device/"]
)
def test_1_application_management_and_other_grants_endpoints_are_not_routed(session_client, path):
    client = session_client()  # a logged-in person without any permission
    assert client.get(path).status_code == 404


def test_1_only_the_client_credentials_grant_is_served(db, user_factory):
    owner = user_factory(username="pw-owner", superuser=True)
    app = Application.objects.create(
        name="password-app",
        user=owner,
        client_type=Application.CLIENT_CONFIDENTIAL,
        authorization_grant_type=Application.GRANT_PASSWORD,
        client_secret=CLIENT_SECRET,
    )
    basic = base64.b64encode(f"{app.client_id}:{CLIENT_SECRET}".encode()).decode()
    response = Client().post(
        "/o/token/",
        {"grant_type": "password", "username": "pw-owner", "password": "pw-for-tests"},
        HTTP_AUTHORIZATION=f"Basic {basic}",
    )
    assert response.status_code == 400 and response.json()["error"] == "unsupported_grant_type"


def _owned_client(owner, name="script"):
    return client_credentials_app(name, owner)


def test_1_a_client_owned_by_a_person_without_permissions_gets_no_operator_scope(db, user_factory, api):
    app = _owned_client(user_factory(username="nobody"))
    basic = base64.b64encode(f"{app.client_id}:{CLIENT_SECRET}".encode()).decode()
    response = api.post(
        "/o/token/",
        {"grant_type": "client_credentials", "scope": "job:create"},
        format="multipart",
        HTTP_AUTHORIZATION=f"Basic {basic}",
    )
    assert response.status_code == 400 and response.json()["error"] == "invalid_scope"


def test_1_an_owner_who_loses_add_job_stops_dispatching_through_their_client(fleet, user_factory, api):
    site = fleet.site("lon-1")
    owner = user_factory(username="lead", perms=["jobs.add_job"])
    token = fetch_token(api, _owned_client(owner), ["job:create"])
    api.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    dispatch = f"/api/v1/burn-in/sites/{site.id}/rerun-plans/dispatch/"
    assert api.post(dispatch, {"device_ids": []}, format="json").status_code in (200, 400)
    owner.user_permissions.remove(Permission.objects.get(codename="add_job"))
    response = api.post(dispatch, {"device_ids": []}, format="json")
    assert response.status_code == 403 and response.json()["code"] == "permission_denied"


def test_1_client_credentials_refuses_scopes_the_user_cannot_use_and_says_why(user_factory):
    user_factory(username="viewer-only", perms=["inventory.view_site"])
    with pytest.raises(CommandError) as refused:
        call_command("client-credentials", "x", "--user", "viewer-only", "--scope", "job:create", stdout=io.StringIO())
    assert "job:create" in str(refused.value) and "jobs.add_job" in str(refused.value)
    assert not Application.objects.filter(name="x").exists()


# --- 2. every request bounded in time on the database ---------------------------------------------


def test_2_connections_carry_statement_lock_and_idle_timeouts_and_keepalives(db):
    with connection.cursor() as cursor:
        shown = {}
        for name in ("statement_timeout", "lock_timeout", "idle_in_transaction_session_timeout"):
            cursor.execute(f"SHOW {name}")
            shown[name] = cursor.fetchone()[0]
    assert shown == {"statement_timeout": "30s", "lock_timeout": "10s", "idle_in_transaction_session_timeout": "1min"}
    cursor = connection.cursor()
    cursor.execute("SHOW jit")  # compiling short statements on stale cost estimates took seconds
    assert cursor.fetchone()[0] == "off"
    params = connection.get_connection_params()
    assert params["keepalives"] == 1 and params["tcp_user_timeout"] == 10_000


@pytest.mark.django_db(transaction=True)
def test_2_a_request_behind_a_held_lock_answers_503_and_the_next_one_works(fleet, bearer, settings):
    fleet.site("lon-1")
    client = bearer(["fleet:read"])
    with connection.cursor() as cursor:
        cursor.execute("SET lock_timeout = '1s'")  # the test's own connection: seconds, not ten
    holder = psycopg.connect(helpers.test_database_url(), autocommit=False)
    try:
        holder.execute("LOCK TABLE inventory_site IN ACCESS EXCLUSIVE MODE")
        response = client.get("/api/v1/sites/")
        assert response.status_code == 503 and response.json()["code"] == "service_unavailable"
        assert response["Retry-After"]
    finally:
        holder.rollback()
        holder.close()
    assert client.get("/api/v1/sites/").status_code == 200


# --- 4 and 8. hostile bodies and loose inputs ---------------------------------------------------------


RESULTS = "/api/v1/burn-in/evaluations/results/"


def test_4_a_body_over_the_limit_is_413_without_reading_it(bearer, settings):
    client = bearer(["test-execution:evaluate"])
    big = "x" * (settings.REQUEST_BOUNDS["MAX_BODY_BYTES"] + 1)
    for content_type in ("application/x-www-form-urlencoded", "application/json"):
        response = client.generic("POST", RESULTS, f"results={big}", content_type=content_type)
        assert response.status_code == 413 and response.json()["code"] == "invalid", content_type


def test_4_more_than_a_thousand_form_fields_is_400(bearer):
    client = bearer(["test-execution:evaluate"])
    body = "&".join(f"f{i}=1" for i in range(1001))
    response = client.generic("POST", RESULTS, body, content_type="application/x-www-form-urlencoded")
    assert response.status_code == 400 and response.json()["code"] == "invalid"


@pytest.mark.parametrize("depth", [65, 1000, 100_000])
def test_4_json_nested_deeper_than_64_is_a_parse_error(bearer, depth):
    client = bearer(["test-execution:evaluate"])
    body = '{"results": ' + "[" * depth + "]" * depth + "}"
    response = client.generic("POST", RESULTS, body, content_type="application/json")
    assert response.status_code == 400 and response.json()["code"] == "parse_error"


def test_4_an_edited_or_truncated_list_cursor_is_400_on_cursor(bearer, fleet):
    satellite = fleet.satellite(fleet.site("lon-1"), "sat-a")
    for _ in range(3):
        fleet.device(satellite)
    client = bearer(["fleet:read"])
    first = client.get("/api/v1/devices/?limit=1").json()
    cursor = first["next"].split("cursor=")[1]
    forged = base64.b64encode(b"p=not-a-timestamp&o=0").decode()
    for bad in (cursor[:-3], cursor[:5] + "A" + cursor[6:], forged, "%%%"):
        for path in ("/api/v1/devices/", "/api/v1/burn-in/policy-progress/"):
            response = client.get(path, {"cursor": bad})
            assert response.status_code == 400, (path, bad, response.content)
            assert [e["field"] for e in response.json()["field_errors"]] == ["cursor"]
    other = client.get("/api/v1/burn-in/policy-progress/", {"cursor": cursor})  # issued for another list
    assert other.status_code == 400


def test_4_an_over_long_url_is_414_with_an_error_response(bearer):
    response = bearer(["fleet:read"]).get("/api/v1/devices/", {"hostname": "h" * 5000})
    assert response.status_code == 414 and response.json()["code"] == "invalid"


def test_8_a_chunked_body_without_a_length_is_411_here(bearer):
    response = bearer(["test-execution:evaluate"]).generic(
        "POST", RESULTS, "", content_type="application/json", HTTP_TRANSFER_ENCODING="chunked"
    )
    assert response.status_code == 411 and response.json()["code"] == "invalid"


def test_8_heartbeat_fields_are_typed(bearer, fleet):
    fleet.satellite(fleet.site("lon-1"), "sat-a")
    client = bearer(["job:run"])
    for field, value in (("agent_version", 123), ("satellite_name", 7)):
        response = client.post(HEARTBEAT, heartbeat_body() | {field: value}, format="json")
        assert response.status_code == 400 and [e["field"] for e in response.json()["field_errors"]] == [field]
    workflows = [{"name": "SingleNodeBurnInWorkflow", "version": 1}]
    response = client.post(HEARTBEAT, heartbeat_body() | {"workflows": workflows}, format="json")
    assert response.status_code == 400


def test_8_a_metric_value_is_bounded_like_its_statistics(bearer, setting):
    from uuid import uuid4

    from fleet.burnin.models import TestExecution
    from tests.burnin.test_executions import URL, body

    device = setting[3]
    client = bearer(["test-execution:report"])
    huge = int("9" * 400)
    for metrics in ({"m": {"value": huge}}, {"m": {"statistics": {"p99": huge}}}):
        response = client.put(URL.format(uuid4()), body(device, metrics=metrics), format="json")
        assert response.status_code == 400, response.content
        assert response.json()["field_errors"][0]["field"].startswith("metrics.m.")
    assert not TestExecution.objects.exists()


@pytest.mark.parametrize("suffix", ["", "cancel/", "finish/", "heartbeat/"])
def test_8_a_malformed_id_in_a_job_url_is_404(bearer, suffix):
    client = bearer(["fleet:read", "job:run", "job:create"])
    method = client.get if not suffix else client.post
    response = method(f"/api/v1/jobs/not-a-uuid/{suffix}")
    assert response.status_code == 404 and response.json()["code"] == "not_found"


# --- 5. people need view permissions ------------------------------------------------------------------


def test_5_a_session_without_permissions_reads_nothing(session_client, fleet):
    from fleet.core.permissions import operation_access

    fleet.site("lon-1")
    client = session_client()
    for operation in operation_access():
        if operation.method != "GET" or "{" in operation.path or operation.path == "/api/v1/auth/whoami/":
            continue
        response = client.get(operation.path)
        assert response.status_code == 403, operation.path


# --- 6. a satellite's client sees only its own site's overrides ---------------------------------------------


def test_6_satellite_tokens_see_only_their_own_sites_overrides(fleet, bearer):
    from fleet.policies.models import ThresholdRule

    own, other = fleet.site("lon-1"), fleet.site("ams-1")
    satellite = fleet.satellite(own, "sat-a")
    requirement = fleet.requirement(fleet.policy("gpu.x"), "diag", test="t")
    for site, value in ((None, 1), (own, 2), (other, 3)):
        ThresholdRule.objects.create(requirement=requirement, metric="m", comparator="gte", threshold=value, site=site)
    body = bearer(["fleet:read"], satellite=satellite).get("/api/v1/policies/").json()
    thresholds = body["results"][0]["requirements"][0]["thresholds"]
    assert {t["site"] for t in thresholds} == {None, str(own.id)}


# --- 7. throttling that protects ---------------------------------------------------------------------------


def clear_of_a_window_edge(margin_s: float = 10) -> None:
    """The limiters count in fixed one-minute windows: a run of requests that straddles a minute's
    end starts counting again (seen once: 7 requests from 10:16:59.80 to 10:17:00.16 on a loaded
    machine). Start with at least `margin_s` left in the window."""
    left = 60 - time.time() % 60
    if left < margin_s:
        time.sleep(left + 0.05)


def test_7_failed_bearer_authentication_is_throttled_per_address(db, api, settings):
    settings.THROTTLES = {**settings.THROTTLES, "AUTH_FAILURES": "5/min"}
    clear_of_a_window_edge()
    api.credentials(HTTP_AUTHORIZATION="Bearer not-a-token")
    statuses = [api.get("/api/v1/sites/").status_code for _ in range(7)]
    assert statuses == [401] * 5 + [429] * 2
    throttled = api.get("/api/v1/sites/")
    assert throttled.json()["code"] == "throttled" and int(throttled["Retry-After"]) > 0


def test_7_the_token_endpoint_is_throttled_per_client_before_the_secret_is_checked(oauth_client, settings):
    settings.THROTTLES = {**settings.THROTTLES, "TOKEN_PER_CLIENT": "3/min"}
    app = oauth_client(name="guessed")
    basic = base64.b64encode(f"{app.client_id}:wrong".encode()).decode()
    clear_of_a_window_edge()
    statuses = [
        Client().post("/o/token/", {"grant_type": "client_credentials"}, HTTP_AUTHORIZATION=f"Basic {basic}")
        for _ in range(4)
    ]
    assert [r.status_code for r in statuses] == [401, 401, 401, 429]
    assert int(statuses[-1]["Retry-After"]) > 0


def test_7_session_login_locks_out_after_repeated_failures(db, user_factory, settings):
    user_factory(username="alice")
    client = Client()
    for _ in range(settings.AXES_FAILURE_LIMIT):
        client.post("/accounts/login/", {"username": "alice", "password": "wrong"})
    locked = client.post("/accounts/login/", {"username": "alice", "password": "pw-for-tests"})
    assert locked.status_code == 429
    assert "_auth_user_id" not in client.session


def test_7_the_schema_document_is_generated_once_per_process(db, monkeypatch):
    from drf_spectacular.generators import SchemaGenerator

    calls = []
    original = SchemaGenerator.get_schema
    monkeypatch.setattr(SchemaGenerator, "get_schema", lambda self, *a, **k: calls.append(1) or original(self, *a, **k))
    from django.core.cache import cache

    cache.clear()
    for _ in range(3):
        assert Client().get("/api/schema/?format=json").status_code == 200
    assert len(calls) == 1


# --- 9. production settings ---------------------------------------------------------------------------


PRODUCTION = {
    "FLEET_HTTPS": "true",
    "DEBUG": "false",
    "SECRET_KEY": "k" * 20 + "-production-like-secret-key-0123456789-abcdefghij",
    "ALLOWED_HOSTS": "fleet.example.com",
}


@pytest.mark.process
def test_9_check_deploy_passes_with_production_values():
    env = {**os.environ, **PRODUCTION, "DATABASE_URL": os.environ.get("DATABASE_URL", "postgres://x@127.0.0.1/x")}
    env.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)  # set by the browser tests for their own process
    done = subprocess.run(
        [sys.executable, "-m", "fleet", "check", "--deploy", "--fail-level", "WARNING"],
        env=env,
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.process
def test_9_https_turns_on_secure_cookies_hsts_and_the_redirect():
    code = (
        "from django.conf import settings as s; import json; print(json.dumps([s.SESSION_COOKIE_SECURE, "
        "s.CSRF_COOKIE_SECURE, s.SECURE_SSL_REDIRECT, s.SECURE_HSTS_SECONDS, s.SECURE_PROXY_SSL_HEADER]))"
    )
    env = {**os.environ, **PRODUCTION, "FLEET_TRUSTED_PROXY": "true", "FLEET_HSTS_SECONDS": "600"}
    done = subprocess.run(
        [sys.executable, "-m", "fleet", "shell", "-c", code], env=env, cwd=REPO, capture_output=True, text=True
    )
    assert json.loads(done.stdout.strip().splitlines()[-1]) == [
        True,
        True,
        True,
        600,
        ["HTTP_X_FORWARDED_PROTO", "https"],
    ], done.stderr
