"""Reads of the webhooks: subscriptions and a subscription's delivery log (a constant number of
queries whatever their number)."""

from __future__ import annotations

from uuid import UUID

from django.db.models import QuerySet

from fleet.core.exceptions import NotFoundError
from fleet.events.models import Delivery, Subscription


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
