"""The webhooks' metrics, read from the database at scrape time (two queries): subscriptions
failing (the alert `FleetWebhookSubscriptionFailing`), deliveries pending, the outbox's backlog.
The `fleet deliver` worker serves no /metrics of its own: what it did is in the delivery log."""

from __future__ import annotations

from collections.abc import Iterable

from django.db.models import Count, Q
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.metrics_core import Metric

from fleet.events.models import Event, Subscription
from fleet_rules.vocabulary import DeliveryStatus


def events_gauges() -> Iterable[Metric]:
    failing = GaugeMetricFamily(
        "fleet_webhook_subscription_failing",
        "1 while a webhook subscription has a delivery given up after its retry window (until one succeeds).",
        labels=["subscription"],
    )
    pending = GaugeMetricFamily(
        "fleet_webhook_deliveries_pending", "Webhook deliveries not yet acknowledged.", labels=["subscription"]
    )
    for name, failing_since, n in Subscription.objects.values_list("name", "failing_since").annotate(
        n=Count("deliveries", filter=Q(deliveries__status=DeliveryStatus.SCHEDULED))
    ):
        failing.add_metric([name], 0.0 if failing_since is None else 1.0)
        pending.add_metric([name], n)
    backlog = GaugeMetricFamily("fleet_events_outbox_backlog", "Events not yet fanned out to their subscriptions.")
    backlog.add_metric([], Event.objects.filter(fanned_out=False).count())
    return [failing, pending, backlog]
