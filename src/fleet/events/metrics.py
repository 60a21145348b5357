"""The webhooks' metrics: subscriptions failing (the alert `FleetWebhookSubscriptionFailing`),
deliveries pending and the outbox's backlog, read at scrape time (two queries); deliveries by
outcome, counted by the worker."""

from __future__ import annotations

from collections.abc import Iterable

from django.db.models import Count, Q
from prometheus_client import Counter
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.metrics_core import Metric

from fleet.events.models import Event, Subscription
from fleet_rules.vocabulary import DeliveryStatus

DELIVERIES = Counter(
    "fleet_webhook_deliveries",
    "Webhook delivery tries by outcome (delivered, retry, failed: given up after the retry window).",
    ["outcome"],
)


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
