"""Reads of the webhooks: subscriptions and a subscription's delivery log (a constant number of
queries whatever their number)."""

from __future__ import annotations

from uuid import UUID

from django.db.models import Count, Q, QuerySet

from fleet.core.exceptions import NotFoundError
from fleet.events.models import Delivery, Subscription
from fleet_rules.vocabulary import DeliveryStatus


def subscriptions() -> QuerySet[Subscription]:
    return Subscription.objects.select_related("site").order_by("name")


def subscription_get(*, subscription_id: UUID) -> Subscription:
    subscription = subscriptions().filter(id=subscription_id).first()
    if subscription is None:
        raise NotFoundError(f"No subscription {subscription_id}.")
    return subscription


def subscription_by_name(*, name: str) -> Subscription:
    subscription = subscriptions().filter(name=name).first()
    if subscription is None:
        raise NotFoundError(f"No subscription {name}.")
    return subscription


def delivery_log(subscription: Subscription, *, limit: int, status: str | None = None) -> list[Delivery]:
    """The subscription's latest deliveries, newest first, with their events (one query)."""
    deliveries = Delivery.objects.filter(subscription=subscription).select_related("event")
    if status:
        deliveries = deliveries.filter(status=status)
    return list(deliveries.order_by("-created_at", "id")[:limit])


def subscriptions_page() -> list[Subscription]:
    """Every subscription with its deliveries counted by status (`scheduled`, `failed`,
    `delivered` attributes): one query, for the dashboard's list."""
    return list(
        subscriptions().annotate(
            scheduled=Count("deliveries", filter=Q(deliveries__status=DeliveryStatus.SCHEDULED)),
            failed=Count("deliveries", filter=Q(deliveries__status=DeliveryStatus.FAILED)),
            delivered=Count("deliveries", filter=Q(deliveries__status=DeliveryStatus.DELIVERED)),
        )
    )


def failed_deliveries(subscription: Subscription, *, shown: int = 10) -> tuple[int, list[Delivery]]:
    """How many of the subscription's deliveries failed, and the first few (what a redelivery will send)."""
    failed = Delivery.objects.filter(subscription=subscription, status=DeliveryStatus.FAILED)
    return failed.count(), list(failed.select_related("event").order_by("created_at", "id")[:shown])
