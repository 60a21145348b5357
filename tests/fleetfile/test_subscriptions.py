"""Webhook subscriptions in the fleet file: created and updated by `fleet apply`, the secret taken
from the environment variable the file names (never the file), SSRF targets and unknown event types
refused as problems of the file, nothing half-written."""

from __future__ import annotations

import pytest

from fleet.events.models import Subscription
from fleet.fleetfile.apply import fleet_apply
from fleet.fleetfile.document import FleetFileError, parse_text
from fleet_rules import webhooks

FILE = """
sites:
  - slug: lon-1
    name: London
subscriptions:
  - name: rma
    url: {url}
    event_types: [com.fleet-burnin.device.needs_repair, com.fleet-burnin.breaker.opened]
    site: lon-1
    allow_private: {private}
    secret_env: RMA_SECRET
"""


def apply(text: str):
    return fleet_apply(document=parse_text(text))


def test_a_declared_subscription_is_created_with_the_environment_s_secret_then_updated(db, monkeypatch):
    secret = webhooks.secret_new()
    monkeypatch.setenv("RMA_SECRET", secret)
    first = apply(FILE.format(url="http://127.0.0.1:9/hook", private="true"))
    assert first.counts["subscriptions"].created == 1
    subscription = Subscription.objects.get(name="rma")
    assert subscription.secret == secret and subscription.site.slug == "lon-1" and subscription.allow_private
    assert subscription.event_types == ["com.fleet-burnin.breaker.opened", "com.fleet-burnin.device.needs_repair"]
    assert secret not in str(first.as_dict())

    again = apply(FILE.format(url="http://127.0.0.1:9/hook", private="true"))
    assert again.counts["subscriptions"].unchanged == 1
    moved = apply(FILE.format(url="http://127.0.0.1:9/other", private="true"))
    assert moved.counts["subscriptions"].updated == 1
    assert Subscription.objects.get(name="rma").url == "http://127.0.0.1:9/other"


def test_a_private_target_without_allow_private_is_a_problem_and_nothing_is_written(db, monkeypatch):
    monkeypatch.setenv("RMA_SECRET", webhooks.secret_new())
    with pytest.raises(FleetFileError, match="loopback"):
        apply(FILE.format(url="http://127.0.0.1:9/hook", private="false"))
    assert not Subscription.objects.exists()


def test_a_missing_secret_variable_and_an_unknown_event_type_are_problems_of_the_file(db, monkeypatch):
    monkeypatch.delenv("RMA_SECRET", raising=False)
    with pytest.raises(FleetFileError, match="RMA_SECRET is not set"):
        apply(FILE.format(url="http://127.0.0.1:9/hook", private="true"))
    with pytest.raises(FleetFileError, match="event_types"):
        parse_text(FILE.format(url="http://x/", private="true").replace("breaker.opened", "breaker.exploded"))
    assert not Subscription.objects.exists()
