"""In a real browser: a person signs in to the dashboard through the company's OpenID Provider (a
real one, tests/support/oidc) — the sign-in page's button, the provider's own login and consent
pages, back to the page they asked for, in the role their groups map to."""

from __future__ import annotations

import re

import pytest
from django.conf import global_settings

from fleet.access.roles import roles_sync
from tests.access.test_oidc import CLIENT_ID, CLIENT_SECRET, start_provider
from tests.dashboard.test_browser import Visit, chromium  # noqa: F401 - the module's browser fixture
from tests.helpers import fleet_env, free_port, start_server, stop

pytestmark = [pytest.mark.browser, pytest.mark.e2e]


def test_a_person_signs_in_through_the_provider_in_a_browser_with_their_group_s_role(
    chromium,  # noqa: F811
    transactional_db,
    settings,
    tmp_path,
):
    settings.PASSWORD_HASHERS = global_settings.PASSWORD_HASHERS
    roles_sync()
    provider_port = free_port()
    env = fleet_env(
        FLEET_OIDC_ISSUER=f"http://127.0.0.1:{provider_port}",
        FLEET_OIDC_CLIENT_ID=CLIENT_ID,
        FLEET_OIDC_CLIENT_SECRET=CLIENT_SECRET,
        FLEET_OIDC_NAME="Example SSO",
        FLEET_PASSWORD_LOGIN="off",
    )
    server, base = start_server(env, workers=1)
    provider = None
    context = chromium.new_context(viewport={"width": 1200, "height": 900})
    try:
        provider = start_provider(tmp_path, port=provider_port, redirect_uris=f"{base}/oidc/callback/")
        provider.users({"grace": ["fleet-operators"]})
        page = context.new_page()
        page.set_default_timeout(15_000)
        visit = Visit(page, base, "oidc-sign-in")

        visit.go("/jobs/", "asked-for-jobs")  # signed out: the sign-in page
        assert page.locator("#id_password").count() == 0  # passwords are off
        page.click("#oidc-sign-in")
        page.wait_for_url(re.compile(rf"http://127.0.0.1:{provider_port}/interaction/"))
        visit.shoot("provider-login")
        page.fill("input[name=login]", "grace")
        page.fill("input[name=password]", "anything")
        page.click("button[type=submit]")
        page.wait_for_url(re.compile(r"/interaction/"))
        visit.shoot("provider-consent")
        page.click("button[type=submit]")
        page.wait_for_url(re.compile(rf"^{re.escape(base)}/jobs/"))
        visit.shoot("signed-in")
        assert page.inner_text("#role") == "operator"
    finally:
        context.close()
        if provider is not None:
            provider.process.kill()
            provider.process.wait()
        output = stop(server)
    assert "Traceback" not in output, output[-4000:]
