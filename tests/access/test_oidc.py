"""Signing in with OpenID Connect against a real OpenID Provider (panva's certified `oidc-provider`,
a Node.js process of its own: tests/support/oidc): the code flow with PKCE, the group → role mapping
applied at every sign-in, a bad state, nonce or issuer refused, and local passwords configurable
off. The person's browser is played by an HTTP client filling in the provider's own pages."""

from __future__ import annotations

import json
import re
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from html import unescape
from pathlib import Path
from urllib.parse import parse_qs, urljoin, urlsplit

import httpx
import pytest
from django.contrib.auth import get_user_model
from django.test import Client

from fleet.access.models import OidcIdentity
from fleet.access.roles import ADMIN, OPERATOR, VIEWER, role_of, roles_sync
from tests.helpers import REPO, free_port
from tests.support.system import require_node_packages

pytestmark = [pytest.mark.e2e]

SUPPORT = REPO / "tests" / "support" / "oidc"
CLIENT_ID, CLIENT_SECRET = "fleet-burnin", "a-test-client-secret-0123456789"
ROLE_GROUPS = {ADMIN: ("fleet-admins",), OPERATOR: ("fleet-operators",), VIEWER: ("fleet-viewers",)}


@dataclass
class Provider:
    issuer: str
    users_file: Path
    process: subprocess.Popen

    def users(self, users: dict[str, list[str]]) -> None:
        self.users_file.write_text(json.dumps({name: {"groups": groups} for name, groups in users.items()}))


def start_provider(
    tmp: Path, *, issuer_host: str = "127.0.0.1", redirect_uris: str = "", port: int | None = None
) -> Provider:
    node = require_node_packages(SUPPORT, why="the OpenID Connect sign-in tests")
    port = port or free_port()
    users_file = tmp / "users.json"
    users_file.write_text("{}")
    issuer = f"http://{issuer_host}:{port}"
    process = subprocess.Popen(
        [str(node), str(SUPPORT / "provider.js"), "--port", str(port), "--issuer", issuer]
        + ["--users", str(users_file), "--client-id", CLIENT_ID, "--client-secret", CLIENT_SECRET]
        + ["--redirect-uri", redirect_uris or "http://testserver/oidc/callback/"],
        cwd=SUPPORT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"http://127.0.0.1:{port}/.well-known/openid-configuration", timeout=1).status_code == 200:
                return Provider(issuer, users_file, process)
        except httpx.TransportError:
            time.sleep(0.1)
    process.kill()
    raise AssertionError("the OpenID Provider did not start")


@pytest.fixture
def provider(tmp_path) -> Iterator[Provider]:
    p = start_provider(tmp_path)
    yield p
    p.process.kill()
    p.process.wait()


def oidc_settings(settings, issuer: str, password_login: str = "admins") -> None:
    settings.FLEET_OIDC = {
        "issuer": issuer,
        "client_id": CLIENT_ID,
        "client_secret": CLIENT_SECRET,
        "scopes": "openid email profile groups",
        "groups_claim": "groups",
        "role_groups": ROLE_GROUPS,
        "name": "Test IdP",
    }
    settings.FLEET_PASSWORD_LOGIN = password_login


def _form(html: str) -> tuple[str, dict[str, str]]:
    """The page's form: its action and its fields (hidden inputs and the named inputs' values)."""
    action = unescape(re.search(r'<form[^>]*action="([^"]+)"', html).group(1))
    fields = {
        unescape(m.group(1)): unescape(m.group(2))
        for m in re.finditer(r'<input[^>]*name="([^"]+)"[^>]*value="([^"]*)"', html)
    }
    return action, fields


def at_provider(authorize_url: str, login: str) -> str:
    """What the person does at the provider: sign in as `login`, consent; returns the URL the
    provider sends the browser back to (the callback, with code and state)."""
    with httpx.Client(follow_redirects=False, timeout=10) as browser:
        url = authorize_url
        for _ in range(20):
            response = browser.get(url)
            if response.status_code in (302, 303):
                url = urljoin(url, response.headers["location"])
                if url.startswith("http://testserver/"):
                    return url
                continue
            action, fields = _form(response.text)
            if 'name="login"' in response.text:
                fields |= {"login": login, "password": "any"}
            response = browser.post(urljoin(url, action), data=fields)
            assert response.status_code in (302, 303), response.text[:500]
            url = urljoin(url, response.headers["location"])
            if url.startswith("http://testserver/"):
                return url
    raise AssertionError("the provider never sent the browser back")


def sign_in(login: str) -> tuple[Client, object]:
    """A browser session signing in through the provider; (the session, the callback's answer)."""
    browser = Client()
    start = browser.get("/oidc/login/?next=/jobs/")
    assert start.status_code == 302, start.content[:300]
    query = parse_qs(urlsplit(start["Location"]).query)
    assert query["code_challenge_method"] == ["S256"] and query["code_challenge"][0]  # PKCE
    assert query["state"][0] and query["nonce"][0]
    back = at_provider(start["Location"], login)
    return browser, browser.get(back[len("http://testserver") :])


def test_a_person_signs_in_with_the_role_their_groups_map_to_and_loses_it_at_the_next_sign_in(provider, settings, db):
    roles_sync()
    oidc_settings(settings, provider.issuer)
    provider.users({"ada": ["fleet-operators", "unrelated"], "bob": ["elsewhere"]})

    browser, answer = sign_in("ada")

    assert answer.status_code == 302 and answer["Location"] == "/jobs/"
    ada = OidcIdentity.objects.get(subject="ada").user
    assert ada.username == "oidc:ada" and not ada.has_usable_password()
    assert role_of(ada) == OPERATOR
    assert browser.get("/api/v1/auth/whoami/").status_code == 200  # the API's session auth too

    provider.users({"ada": ["fleet-viewers"]})  # moved to viewers at the provider
    sign_in("ada")
    assert role_of(get_user_model().objects.get(id=ada.id)) == VIEWER
    provider.users({"ada": [], "bob": ["elsewhere"]})  # removed from every mapped group
    sign_in("ada")
    assert role_of(get_user_model().objects.get(id=ada.id)) == "no role"

    _, answer = sign_in("bob")  # in no mapped group: signed in, no role
    assert answer.status_code == 302 and role_of(OidcIdentity.objects.get(subject="bob").user) == "no role"


def test_a_bad_state_or_nonce_is_refused_and_signs_nobody_in(provider, settings, db):
    oidc_settings(settings, provider.issuer)
    provider.users({"ada": ["fleet-admins"]})
    browser = Client()
    start = browser.get("/oidc/login/")
    back = at_provider(start["Location"], "ada")
    forged = re.sub(r"state=[^&]+", "state=forged", back)
    refused = browser.get(forged[len("http://testserver") :])
    assert refused.status_code == 400 and "refused" in refused.content.decode()
    assert "_auth_user_id" not in browser.session

    # the nonce the session keeps for this sign-in changed: the ID token's nonce no longer matches
    browser = Client()
    start = browser.get("/oidc/login/")
    back = at_provider(start["Location"], "ada")
    session = browser.session
    for key, value in list(session.items()):
        if key.startswith("_state_fleet_") and isinstance(value, dict):
            value["data"]["nonce"] = "another-nonce"
            session[key] = value
    session.save()
    refused = browser.get(back[len("http://testserver") :])
    assert refused.status_code == 400 and "nonce" in refused.content.decode().lower()
    assert not OidcIdentity.objects.exists()


def test_a_provider_naming_another_issuer_is_refused(tmp_path, settings, db):
    # The provider calls itself http://localhost:P; the service is told http://127.0.0.1:P.
    other = start_provider(tmp_path, issuer_host="localhost")
    try:
        port = urlsplit(other.issuer).port
        oidc_settings(settings, f"http://127.0.0.1:{port}")
        response = Client().get("/oidc/login/")
        assert response.status_code == 400 and "issuer" in response.content.decode()
    finally:
        other.process.kill()
        other.process.wait()


@pytest.mark.parametrize(
    ("mode", "admin_may", "person_may"), [("on", True, True), ("admins", True, False), ("off", False, False)]
)
def test_local_passwords_are_on_for_break_glass_admins_only_or_off(settings, user_factory, mode, admin_may, person_may):
    settings.FLEET_PASSWORD_LOGIN = mode
    user_factory(username="root", superuser=True)
    user_factory(username="pat")
    for name, may in (("root", admin_may), ("pat", person_may)):
        browser = Client()
        browser.post("/accounts/login/", {"username": name, "password": "pw-for-tests"})
        assert ("_auth_user_id" in browser.session) is may, (mode, name)
    page = Client().get("/accounts/login/").content.decode()
    assert ('name="password"' in page) is (mode != "off")
