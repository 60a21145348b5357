"""In a real browser: an admin opens Webhooks from the header, follows a failing subscription to
its delivery log, and redelivers what failed through the confirmation (Post/Redirect/Get)."""

from __future__ import annotations

import re

import pytest
from django.conf import global_settings
from django.contrib.auth import get_user_model

from fleet.events.models import Delivery
from fleet_rules.vocabulary import DeliveryStatus
from tests.dashboard.test_browser import PASSWORD, Visit, chromium  # noqa: F401 - the module's browser
from tests.dashboard.test_webhooks import subscription_with
from tests.helpers import fleet_env, start_server, stop

pytestmark = [pytest.mark.browser, pytest.mark.e2e]


def test_an_admin_redelivers_a_failing_subscription_s_deliveries(chromium, transactional_db, settings):  # noqa: F811
    settings.PASSWORD_HASHERS = global_settings.PASSWORD_HASHERS
    get_user_model().objects.create_superuser("boss", "boss@example.com", PASSWORD)
    subscription_with(3, "rma")
    server, base = start_server(fleet_env(), workers=1)
    context = chromium.new_context(viewport={"width": 1300, "height": 900})
    try:
        page = context.new_page()
        page.set_default_timeout(15_000)
        visit = Visit(page, base, "webhooks-redeliver")
        visit.sign_in("boss")
        page.click("nav >> text=Webhooks")
        page.wait_for_url(re.compile(r"/webhooks/$"))
        visit.shoot("subscriptions")
        assert "rma" in page.inner_text("#subscriptions")
        page.click("#subscriptions >> text=rma")
        page.wait_for_url(re.compile(r"/webhooks/rma/$"))
        visit.shoot("delivery-log")
        assert page.locator("#deliveries tbody tr").count() == 3
        assert "✗ failed" in page.inner_text("#deliveries")
        page.click("#redeliver")
        page.wait_for_url(re.compile(r"/webhooks/rma/redeliver/\?token="))
        visit.shoot("confirmation")
        page.check("#confirm")
        page.click("#confirm-redeliver")
        page.wait_for_url(re.compile(r"/webhooks/rma/\?status=scheduled$"))
        visit.shoot("rescheduled")
        assert page.locator("#deliveries tbody tr").count() == 3
        assert "… scheduled" in page.inner_text("#deliveries")
        assert Delivery.objects.filter(status=DeliveryStatus.SCHEDULED).count() == 3
    finally:
        context.close()
        output = stop(server)
    assert "Traceback" not in output, output[-4000:]
