"""Real OAuth2 clients (client-credentials grant at /o/token/) and session users."""

from __future__ import annotations

from datetime import timedelta

from django.utils import timezone
from oauth2_provider.models import AccessToken

from tests.core.test_errors import assert_error

HEARTBEAT = "/api/v1/satellites/heartbeat/"


def heartbeat_body():
    return {
        "site_slug": "lon-1",
        "satellite_name": "sat-a",
        "workflows": [{"name": "SingleNodeBurnInWorkflow", "version": "1"}],
    }


def test_token_with_the_required_scope_passes(bearer, fleet):
    fleet.satellite(fleet.site("lon-1"), "sat-a")
    client = bearer(["job:run"])
    response = client.post(HEARTBEAT, heartbeat_body(), format="json")
    assert response.status_code == 200, response.content
    assert response.json()["advertised_workflows"] == [{"name": "SingleNodeBurnInWorkflow", "version": "1"}]


def test_token_without_the_required_scope_is_403(bearer, fleet):
    fleet.satellite(fleet.site("lon-1"), "sat-a")
    client = bearer(["fleet:read"])
    assert_error(client.post(HEARTBEAT, heartbeat_body(), format="json"), 403, "permission_denied")


def test_expired_token_is_401(bearer, db):
    client = bearer(["fleet:read"])
    assert client.get("/api/v1/sites/").status_code == 200
    AccessToken.objects.update(expires=timezone.now() - timedelta(seconds=1))
    assert_error(client.get("/api/v1/sites/"), 401, "authentication_failed")


def test_satellite_client_cannot_ask_for_scopes_beyond_the_satellite_ones(oauth_client, fleet, api):
    import base64

    from tests.conftest import CLIENT_SECRET

    satellite = fleet.satellite(fleet.site("lon-1"), "sat-a")
    app = oauth_client(name="sat", satellite=satellite)
    basic = base64.b64encode(f"{app.client_id}:{CLIENT_SECRET}".encode()).decode()
    response = api.post(
        "/o/token/",
        {"grant_type": "client_credentials", "scope": "job:create"},
        format="multipart",
        HTTP_AUTHORIZATION=f"Basic {basic}",
    )
    assert response.status_code == 400
    assert response.json()["error"] == "invalid_scope"


def test_satellite_client_cannot_act_as_another_satellite(bearer, fleet):
    site = fleet.site("lon-1")
    own = fleet.satellite(site, "sat-a")
    fleet.satellite(site, "sat-b")
    client = bearer(["job:run"], satellite=own)
    body = heartbeat_body() | {"satellite_name": "sat-b"}
    assert_error(client.post(HEARTBEAT, body, format="json"), 403, "permission_denied")
    assert client.post(HEARTBEAT, heartbeat_body(), format="json").status_code == 200


def test_session_user_without_the_permission_is_403(session_client, fleet):
    fleet.satellite(fleet.site("lon-1"), "sat-a")
    client = session_client()
    csrf = _csrf_token(client)
    response = client.post(HEARTBEAT, heartbeat_body(), format="json", HTTP_X_CSRFTOKEN=csrf)
    assert_error(response, 403, "permission_denied")


def test_session_user_with_the_permission_and_csrf_passes(session_client, fleet):
    fleet.satellite(fleet.site("lon-1"), "sat-a")
    client = session_client(perms=["inventory.change_satellite"])
    csrf = _csrf_token(client)
    response = client.post(HEARTBEAT, heartbeat_body(), format="json", HTTP_X_CSRFTOKEN=csrf)
    assert response.status_code == 200, response.content


def test_session_post_without_csrf_is_403(session_client, fleet):
    fleet.satellite(fleet.site("lon-1"), "sat-a")
    client = session_client(perms=["inventory.change_satellite"])
    response = client.post(HEARTBEAT, heartbeat_body(), format="json")
    body = assert_error(response, 403, "permission_denied")
    assert "CSRF" in body["detail"]


def test_session_user_with_the_view_permission_can_read(session_client, fleet):
    fleet.site("lon-1")
    client = session_client(perms=["inventory.view_site"])
    response = client.get("/api/v1/sites/")
    assert response.status_code == 200
    assert [s["slug"] for s in response.json()["results"]] == ["lon-1"]


def test_login_page_signs_a_person_in(client, user_factory):
    user_factory(username="alice")
    assert client.get("/accounts/login/").status_code == 200
    response = client.post("/accounts/login/", {"username": "alice", "password": "pw-for-tests"})
    assert response.status_code == 302
    assert client.get("/api/v1/auth/whoami/").json()["principal"] == "user:alice"
    client.post("/accounts/logout/")
    assert client.get("/api/v1/auth/whoami/").status_code == 401


def test_whoami_describes_a_satellite_client(bearer, fleet):
    satellite = fleet.satellite(fleet.site("lon-1"), "sat-a")
    client = bearer(["fleet:read", "job:run"], satellite=satellite, name="sat-a-client")
    body = client.get("/api/v1/auth/whoami/").json()
    assert body == {
        "principal": "client:sat-a-client",
        "kind": "client",
        "scopes": ["fleet:read", "job:run"],
        "site_slug": "lon-1",
        "satellite_name": "sat-a",
    }


def _csrf_token(client) -> str:
    client.get("/accounts/login/")
    return client.cookies["csrftoken"].value


def test_a_satellite_token_is_read_with_its_satellite_and_site_in_one_query(bearer, fleet):
    """BearerTokenValidator: the token, its client, the client's satellite and that satellite's
    site in one statement; nothing looks the client's satellite up again."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    satellite = fleet.satellite(fleet.site("lon-1"), "sat-a")
    client = bearer(["job:run"], satellite=satellite)
    with CaptureQueriesContext(connection) as captured:
        response = client.post(HEARTBEAT, heartbeat_body(), format="json")
    assert response.status_code == 200, response.content
    token_reads = [q["sql"] for q in captured if "oauth2_provider_accesstoken" in q["sql"]]
    assert len(token_reads) == 1
    assert '"inventory_site"' in token_reads[0] and '"inventory_satellite"' in token_reads[0]
    assert [q["sql"] for q in captured if "inventory_satellitecredential" in q["sql"]] == token_reads
