"""`fleet satellite-credentials`: a real client-credentials client bound to one satellite."""

from __future__ import annotations

import base64
import io
import json

import pytest
from django.core.management import CommandError, call_command

from fleet.inventory.models import SatelliteCredential


def token_for(api, client_id, secret, scope="fleet:read job:run"):
    basic = base64.b64encode(f"{client_id}:{secret}".encode()).decode()
    return api.post(
        "/o/token/",
        {"grant_type": "client_credentials", "scope": scope},
        format="multipart",
        HTTP_AUTHORIZATION=f"Basic {basic}",
    )


def issue(site, satellite) -> dict:
    out = io.StringIO()
    call_command("satellite-credentials", site, satellite, "--json", stdout=out)
    return json.loads(out.getvalue())


def test_issued_credentials_get_a_token_bound_to_the_satellite(fleet, api):
    satellite = fleet.satellite(fleet.site("lon-1"), "sat-a")
    creds = issue("lon-1", "sat-a")
    assert set(creds) == {"client_id", "client_secret"}
    assert SatelliteCredential.objects.get(satellite=satellite).application.client_id == creds["client_id"]
    response = token_for(api, creds["client_id"], creds["client_secret"])
    assert response.status_code == 200, response.content
    api.credentials(HTTP_AUTHORIZATION=f"Bearer {response.json()['access_token']}")
    me = api.get("/api/v1/auth/whoami/").json()
    assert (me["site_slug"], me["satellite_name"]) == ("lon-1", "sat-a")


def test_rotation_invalidates_the_old_secret_and_its_tokens(fleet, api):
    fleet.satellite(fleet.site("lon-1"), "sat-a")
    old = issue("lon-1", "sat-a")
    token = token_for(api, old["client_id"], old["client_secret"]).json()["access_token"]
    new = issue("lon-1", "sat-a")
    assert new["client_id"] == old["client_id"] and new["client_secret"] != old["client_secret"]
    assert token_for(api, old["client_id"], old["client_secret"]).status_code == 401
    assert token_for(api, new["client_id"], new["client_secret"]).status_code == 200
    api.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    assert api.get("/api/v1/auth/whoami/").status_code == 401


def test_unknown_satellite_is_a_clear_error(fleet):
    fleet.site("lon-1")
    with pytest.raises(CommandError, match="no satellite 'sat-x' at site 'lon-1'"):
        issue("lon-1", "sat-x")


def test_plain_output_shows_the_secret_once(fleet):
    fleet.satellite(fleet.site("lon-1"), "sat-a")
    out = io.StringIO()
    call_command("satellite-credentials", "lon-1", "sat-a", stdout=out)
    text = out.getvalue()
    assert "client_id:" in text and "client_secret:" in text and "will not be shown again" in text


def test_a_deleted_satellite_credential_leaves_its_client_powerless(fleet, api):
    satellite = fleet.satellite(fleet.site("lon-1"), "sat-a")
    creds = issue("lon-1", "sat-a")
    token = token_for(api, creds["client_id"], creds["client_secret"]).json()["access_token"]
    SatelliteCredential.objects.filter(satellite=satellite).delete()
    api.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    response = api.get("/api/v1/auth/whoami/")
    assert response.status_code == 401 and "may not act" in response.json()["detail"]
    api.credentials()
    refused = token_for(api, creds["client_id"], creds["client_secret"], scope="job:create")
    assert refused.status_code == 400 and refused.json()["error"] == "invalid_scope"


def test_operator_clients_act_while_their_owner_is_active(user_factory, api):
    owner = user_factory(username="lead", perms=["jobs.add_job", "inventory.view_site"])
    out = io.StringIO()
    call_command(
        "client-credentials", "dispatcher", "--user", "lead", "--scope", "job:create fleet:read", "--json", stdout=out
    )
    creds = json.loads(out.getvalue())
    token = token_for(api, creds["client_id"], creds["client_secret"], scope="job:create fleet:read")
    assert token.status_code == 200, token.content
    api.credentials(HTTP_AUTHORIZATION=f"Bearer {token.json()['access_token']}")
    assert api.get("/api/v1/auth/whoami/").json()["kind"] == "client"
    owner.is_active = False
    owner.save()
    assert api.get("/api/v1/auth/whoami/").status_code == 401


def test_an_unowned_unbound_client_gets_no_scope(db, api):
    from oauth2_provider.models import Application

    from tests.conftest import CLIENT_SECRET

    app = Application.objects.create(
        name="stray",
        client_type=Application.CLIENT_CONFIDENTIAL,
        authorization_grant_type=Application.GRANT_CLIENT_CREDENTIALS,
        client_secret=CLIENT_SECRET,
    )
    response = token_for(api, app.client_id, CLIENT_SECRET, scope="fleet:read")
    assert response.status_code == 400 and response.json()["error"] == "invalid_scope"
