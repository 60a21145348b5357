"""Shared fixtures: API clients, real OAuth2 clients and tokens, and small builders; the suite's
Hypothesis profile, the markers the process-starting fixtures give their tests, and the check that
no unmarked test starts a process (tests/support/suite.py)."""

from __future__ import annotations

import base64
import gc
from collections.abc import Callable
from pathlib import Path

import pytest
from django.contrib.auth import get_user_model
from oauth2_provider.models import Application
from rest_framework.test import APIClient

from tests.builders import FleetBuilder
from tests.helpers import suite_certificate_key
from tests.schema_validation import ValidatingAPIClient
from tests.slurm.cluster import STEP_LOGS, step_summary
from tests.support import hypothesis_profiles, suite, template_db

CLIENT_SECRET = "s3cret-for-tests-only"

#: Loaded before any test module is imported: `examples(n)` in their `@settings` reads it.
HYPOTHESIS_PROFILE = hypothesis_profiles.load()


def pytest_configure(config: pytest.Config) -> None:
    # A plugin, not hooks of this conftest: pytest calls a conftest's fixture hooks only for the
    # fixtures of nodes below it, and a session fixture's node is the session.
    if not config.pluginmanager.has_plugin(suite.SpawnCheck.name):
        config.pluginmanager.register(suite.SpawnCheck(), suite.SpawnCheck.name)


def pytest_report_header(config: pytest.Config) -> str:
    return f"hypothesis profile: {HYPOTHESIS_PROFILE} (${hypothesis_profiles.ENV}, ci under CI)"


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    # First, so that xdist's own hook (which sorts by group under --dist loadgroup) sees the groups.
    suite.refuse_duplicate_ids(items)
    suite.mark_by_fixtures(items)
    suite.group_ids(config, items)


def pytest_sessionfinish(session: pytest.Session) -> None:
    # A pytest-xdist worker hands its Slurm step logs to the controller, which prints the summary.
    workeroutput = getattr(session.config, "workeroutput", None)
    if workeroutput is not None:
        workeroutput["slurm_step_logs"] = [str(log) for log in STEP_LOGS]


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node, error) -> None:
    STEP_LOGS.extend(Path(log) for log in getattr(node, "workeroutput", {}).get("slurm_step_logs", []))


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    for log in STEP_LOGS:
        terminalreporter.write_line(step_summary(log))


@pytest.fixture(scope="session")
def django_db_modify_db_settings(django_db_modify_db_settings_parallel_suffix, request, django_db_blocker) -> None:
    """A pytest-xdist worker creates its test database from the run's migrated template instead of
    migrating it from scratch (tests/support/template_db.py)."""
    if not hasattr(request.config, "workerinput"):
        return
    from django.conf import settings

    with django_db_blocker.unblock():
        template = template_db.migrated_template()
    settings.DATABASES["default"]["TEST"]["TEMPLATE"] = template


@pytest.fixture(autouse=True)
def _fast_password_hashing(settings):
    """Client secrets and passwords are hashed like passwords; the slow default hasher would
    dominate the suite's run time without testing anything of ours."""
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture(autouse=True)
def _signing_key(request, settings):
    """The suite's signing key (`tests.helpers.SUITE_CERTIFICATE_KEY`), published in the test's
    database when the test has one: signing never mints or publishes a key by itself."""
    settings.CERTIFICATE_KEY_FILE = str(suite_certificate_key())
    names = request.fixturenames
    if "transactional_db" in names:
        request.getfixturevalue("transactional_db")
    elif "db" in names:
        request.getfixturevalue("db")
    elif request.node.get_closest_marker("django_db") is None:
        return
    from fleet.burnin.certificates.signing import signing_key_publish

    signing_key_publish()


@pytest.fixture
def api() -> APIClient:
    return ValidatingAPIClient()


@pytest.fixture
def fleet(db) -> FleetBuilder:
    return FleetBuilder()


@pytest.fixture
def oauth_client(db) -> Callable[..., Application]:
    """A confidential client-credentials OAuth2 application, optionally bound to a satellite."""

    def make(name: str = "automation", satellite=None) -> Application:
        if satellite is not None:
            from fleet.inventory.models import SatelliteCredential

            bound = SatelliteCredential.objects.filter(satellite=satellite).select_related("application").first()
            if bound is not None:
                return bound.application
        owner = None
        if satellite is None:
            # Clients that are not a satellite's act for an active owner (fail-closed identity)
            # and with at most the owner's permissions: this owner holds every one.
            owner, _ = get_user_model().objects.get_or_create(
                username=f"owner-of-{name}", defaults={"is_superuser": True}
            )
        app = client_credentials_app(name, owner)
        if satellite is not None:
            from fleet.inventory.models import SatelliteCredential

            SatelliteCredential.objects.create(satellite=satellite, application=app)
        return app

    return make


def client_credentials_app(name: str, owner) -> Application:
    """A confidential client-credentials application with the tests' secret, owned by `owner`."""
    return Application.objects.create(
        name=name,
        user=owner,
        client_type=Application.CLIENT_CONFIDENTIAL,
        authorization_grant_type=Application.GRANT_CLIENT_CREDENTIALS,
        client_secret=CLIENT_SECRET,
    )


def fetch_token(client: APIClient, app: Application, scopes: list[str] | str) -> str:
    """Get an access token through the real token endpoint (client-credentials grant)."""
    scope = scopes if isinstance(scopes, str) else " ".join(scopes)
    basic = base64.b64encode(f"{app.client_id}:{CLIENT_SECRET}".encode()).decode()
    response = client.post(
        "/o/token/",
        {"grant_type": "client_credentials", "scope": scope},
        format="multipart",
        HTTP_AUTHORIZATION=f"Basic {basic}",
    )
    assert response.status_code == 200, response.content
    return response.json()["access_token"]


@pytest.fixture
def bearer(oauth_client) -> Callable[..., APIClient]:
    """An API client authenticated with a real token holding `scopes`."""

    def make(scopes: list[str] | str, satellite=None, name: str = "automation") -> APIClient:
        app = oauth_client(name=name, satellite=satellite)
        client = ValidatingAPIClient()
        token = fetch_token(client, app, scopes)
        client.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
        return client

    return make


@pytest.fixture
def user_factory(db):
    def make(username: str = "operator", perms: list[str] | None = None, superuser: bool = False):
        User = get_user_model()
        if superuser:
            return User.objects.create_superuser(username, f"{username}@example.com", "pw-for-tests")
        user = User.objects.create_user(username, f"{username}@example.com", "pw-for-tests")
        if perms:
            from django.contrib.auth.models import Permission

            for perm in perms:
                app_label, codename = perm.split(".")
                user.user_permissions.add(Permission.objects.get(content_type__app_label=app_label, codename=codename))
        return user

    return make


@pytest.fixture
def session_client(user_factory) -> Callable[..., APIClient]:
    """A logged-in person; CSRF checks enforced as in a browser."""

    def make(perms: list[str] | None = None, superuser: bool = False, username: str = "operator") -> APIClient:
        user = user_factory(username=username, perms=perms, superuser=superuser)
        client = ValidatingAPIClient(enforce_csrf_checks=True)
        client.force_login(user)
        return client

    return make


@pytest.fixture
def collecting():
    """The cyclic collector on for the test (as in a served process), and as it was after."""
    enabled = gc.isenabled()
    gc.enable()
    yield
    if not enabled:
        gc.disable()


@pytest.fixture
def collector_seen(monkeypatch, collecting):
    """`collector_seen(owner, name)`: a list that records, at each call of `owner.name`, whether
    the cyclic collector was on (the collector is on for the test)."""

    def watch(owner: object, name: str) -> list[bool]:
        seen: list[bool] = []
        real = getattr(owner, name)

        def recorded(*args, **kwargs):
            seen.append(gc.isenabled())
            return real(*args, **kwargs)

        monkeypatch.setattr(owner, name, recorded)
        return seen

    return watch
