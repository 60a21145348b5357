"""The webhooks' pages: admins see the subscriptions and each one's delivery log (a constant number
of queries whatever its length), and redeliver what failed through a confirmation under a one-time
token (Post/Redirect/Get: a replayed POST sends nothing again); others are refused, naming the role."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from fleet.events.models import Delivery, Event, Subscription
from fleet.events.outbox import Draft, events_record
from fleet_rules.vocabulary import DeliveryStatus, EventType
from tests.dashboard.conftest import OPERATOR, csrf, form_fields

ADMIN = [
    "events.view_subscription",
    "events.change_subscription",
    "burnin.view_policyprogress",
    "jobs.view_job",
]


def subscription_with(n: int, name: str) -> Subscription:
    subscription = Subscription.objects.create(name=name, url="https://hooks.example.com/x", secret="whsec_x")
    events_record(
        [Draft(EventType.DEVICE_NEEDS_REPAIR, f"sites/lon-1/devices/{name}-n{i}", None, {}) for i in range(n)],
        now=timezone.now(),
    )
    Delivery.objects.bulk_create(
        Delivery(
            subscription=subscription,
            event=e,
            status=DeliveryStatus.FAILED,
            attempts=7,
            response_code=500,
            error="HTTP 500: down",
            created_at=timezone.now(),
        )
        for e in Event.objects.filter(deliveries__isnull=True)
    )
    return subscription


def page_queries(browser, url: str) -> tuple[int, str]:
    with CaptureQueriesContext(connection) as queries:
        response = browser.get(url)
    assert response.status_code == 200, response.status_code
    return len(queries), response.content.decode()


def test_the_list_and_the_log_take_the_same_queries_at_two_sizes(person, db):
    browser = person(ADMIN, username="boss")
    small, large = subscription_with(2, "small"), subscription_with(30, "large")
    Subscription.objects.filter(id=large.id).update(failing_since=timezone.now())

    small_n, _ = page_queries(browser, "/webhooks/small/")
    large_n, page = page_queries(browser, "/webhooks/large/")

    assert small_n == large_n
    assert page.count("✗ failed") == 30 and "HTTP 500" in page and "✗ failing since" in page
    _, listing = page_queries(browser, "/webhooks/")
    assert 'href="/webhooks/large/?status=failed">30<' in listing and "✓ delivering" in listing
    assert small.name in listing
    lost = browser.get("/webhooks/large/?status=lost")
    assert lost.status_code == 400 and "unknown delivery status" in lost.content.decode()
    assert browser.get("/webhooks/large/?stat=failed").status_code == 400  # a misspelt parameter


def test_redeliver_is_a_confirmation_then_one_action_per_token(person, db):
    browser = person(ADMIN, username="boss")
    subscription_with(12, "rma")
    first = browser.get("/webhooks/rma/redeliver/")
    assert first.status_code == 302 and "token=" in first["Location"]
    confirmation = browser.get(first["Location"])
    page = confirmation.content.decode()
    assert "12 failed deliveries" in page and "and 2 more" in page and confirmation["Cache-Control"] == "no-store"
    fields = form_fields(page, "/webhooks/rma/redeliver/") | {"csrfmiddlewaretoken": [csrf(browser)]}

    done = browser.post("/webhooks/rma/redeliver/", fields)

    assert done.status_code == 303 and done["Location"] == "/webhooks/rma/?status=scheduled"
    assert Delivery.objects.filter(status=DeliveryStatus.SCHEDULED, attempts=0).count() == 12
    # they fail again; the same form posted again (a reload) redelivers nothing
    Delivery.objects.update(status=DeliveryStatus.FAILED)
    again = browser.post("/webhooks/rma/redeliver/", fields)
    assert again.status_code == 303 and again["Location"] == done["Location"]
    assert not Delivery.objects.filter(status=DeliveryStatus.SCHEDULED).exists()
    used = browser.get(first["Location"]).content.decode()
    assert "already used" in used and "12 scheduled" in used


@pytest.mark.parametrize("path", ["/webhooks/", "/webhooks/rma/", "/webhooks/rma/redeliver/?token=x"])
def test_an_operator_is_refused_the_webhook_pages_naming_the_admin_role(person, db, path):
    subscription_with(1, "rma")
    response = person(OPERATOR, username="op").get(path)
    assert response.status_code == 403 and "admin role" in response.content.decode()
    assert "Webhooks</a>" not in person(OPERATOR, username="op2").get("/jobs/").content.decode()
