"""The webhooks' API: admins subscribe (the secret shown once), read a delivery log, redeliver;
bad input is a 400 naming the field and writes nothing; SSRF targets are refused."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from fleet.events.models import Delivery, Event, Subscription
from fleet.events.outbox import Draft, events_record
from fleet_rules.vocabulary import DeliveryStatus, EventType

URL = "/api/v1/webhooks/subscriptions/"


@pytest.fixture
def admin(session_client):
    return session_client(superuser=True, username="boss")


def csrf(client) -> dict[str, str]:
    client.get("/accounts/login/")
    return {"HTTP_X_CSRFTOKEN": client.cookies["csrftoken"].value}


def test_an_admin_subscribes_and_sees_the_secret_once(admin, fleet):
    fleet.site("lon-1")
    body = {
        "name": "rma",
        "url": "http://127.0.0.1:9/hook",
        "event_types": [EventType.DEVICE_NEEDS_REPAIR],
        "site": "lon-1",
        "allow_private": True,
    }
    created = admin.post(URL, body, format="json", **csrf(admin))
    assert created.status_code == 201, created.content
    answer = created.json()
    assert answer["secret"].startswith("whsec_") and answer["site"] == "lon-1"
    listed = admin.get(URL).json()["results"]
    assert [s["name"] for s in listed] == ["rma"] and "secret" not in listed[0]
    again = admin.post(URL, body, format="json", **csrf(admin))
    assert again.status_code == 409 and again.json()["code"] == "conflict"


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"name": "a", "url": "http://127.0.0.1/x"}, "url"),  # loopback without allow_private
        ({"name": "a", "url": "http://169.254.169.254/latest/meta-data/"}, "url"),  # cloud metadata
        ({"name": "a", "url": "http://10.0.0.8/x"}, "url"),
        ({"name": "a", "url": "ftp://example.com/x"}, "url"),
        ({"name": "a", "url": "http://127.0.0.1/x", "allow_private": True, "event_types": ["nope"]}, "event_types.0"),
        ({"name": "a b", "url": "http://127.0.0.1/x", "allow_private": True}, "name"),
        ({"name": "a", "url": "http://127.0.0.1/x", "allow_private": True, "site": "nowhere"}, "site"),
    ],
)
def test_bad_subscriptions_are_400_naming_the_field_and_write_nothing(admin, db, body, field):
    response = admin.post(URL, body, format="json", **csrf(admin))
    assert response.status_code == 400, response.content
    assert field in [e["field"] for e in response.json()["field_errors"]], response.json()
    assert not Subscription.objects.exists()


def _subscription_with_deliveries(n: int) -> Subscription:
    subscription = Subscription.objects.create(name=f"s{n}", url="http://127.0.0.1:9/", secret="whsec_x")
    events_record([Draft(EventType.BREAKER_OPENED, f"x/{i}", None, {}) for i in range(n)], now=timezone.now())
    Delivery.objects.bulk_create(
        Delivery(subscription=subscription, event=e, status=DeliveryStatus.FAILED, created_at=timezone.now())
        for e in Event.objects.filter(deliveries__isnull=True)
    )
    return subscription


def test_the_delivery_log_takes_the_same_queries_at_two_sizes_and_redeliver_reschedules(admin, db):
    def log_queries(subscription) -> int:
        with CaptureQueriesContext(connection) as queries:
            response = admin.get(f"{URL}{subscription.id}/deliveries/", {"status": "failed"})
        assert response.status_code == 200
        assert len(response.json()["results"]) == subscription.deliveries.count()
        return len(queries)

    small, large = _subscription_with_deliveries(2), _subscription_with_deliveries(40)
    assert log_queries(small) == log_queries(large)

    redone = admin.post(f"{URL}{large.id}/redeliver/", {}, format="json", **csrf(admin))
    assert redone.status_code == 200 and redone.json() == {"scheduled": 40}
    assert large.deliveries.filter(status=DeliveryStatus.SCHEDULED).count() == 40
    assert small.deliveries.filter(status=DeliveryStatus.FAILED).count() == 2  # another subscription's: untouched
    bad = admin.get(f"{URL}{large.id}/deliveries/", {"status": "lost"})
    assert bad.status_code == 400 and [e["field"] for e in bad.json()["field_errors"]] == ["status"]


def test_an_operator_or_a_viewer_may_not_see_or_change_subscriptions(session_client, db):
    from fleet.access.roles import OPERATOR_PERMISSIONS

    operator = session_client(perms=list(OPERATOR_PERMISSIONS) + ["burnin.view_policyprogress"], username="op")
    assert operator.get(URL).status_code == 403
    response = operator.post(URL, {"name": "a", "url": "https://example.com/"}, format="json", **csrf(operator))
    assert response.status_code == 403 and not Subscription.objects.exists()
