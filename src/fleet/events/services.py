"""Subscriptions and redeliveries: the writes people make (API, dashboard, fleet file)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from uuid import UUID

from django.db import transaction
from django.utils import timezone

from fleet.core.exceptions import Conflict, FleetError, NotFoundError
from fleet.events.models import Delivery, Subscription
from fleet.events.targets import url_refusal
from fleet.inventory.models import Site
from fleet_rules import webhooks
from fleet_rules.vocabulary import DeliveryStatus, EventType


@dataclass(frozen=True)
class Created:
    """A subscription and its signing secret (shown once, as a client secret is)."""

    subscription: Subscription
    secret: str


def _checked(*, url: str, event_types: Sequence[str], allow_private: bool) -> list[str]:
    refused = url_refusal(url, allow_private=allow_private)
    if refused is not None:
        raise FleetError(f"The URL is refused: {refused}.", field_errors={"url": [refused]})
    unknown = sorted(set(event_types) - set(EventType.values))
    if unknown:
        raise FleetError(
            f"Unknown event types: {', '.join(unknown)}.",
            field_errors={"event_types": [f"unknown: {', '.join(unknown)}; known: {', '.join(EventType.values)}"]},
        )
    return sorted(set(event_types))


@transaction.atomic
def subscription_create(
    *,
    name: str,
    url: str,
    event_types: Sequence[str] = (),
    site: Site | None = None,
    allow_private: bool = False,
    secret: str | None = None,
    retry_window_seconds: int | None = None,
    actor: str,
) -> Created:
    """A new subscription (409 when the name is taken). The URL is checked now (SSRF) and before
    every delivery; `allow_private` is an admin's decision (the API asks for the permission)."""
    types = _checked(url=url, event_types=event_types, allow_private=allow_private)
    if Subscription.objects.filter(name=name).exists():
        raise Conflict(f"A subscription named {name} exists.", field_errors={"name": ["taken"]})
    secret = secret or webhooks.secret_new()
    try:
        webhooks.secret_key(secret)
    except ValueError as exc:
        raise FleetError(f"The secret is not usable: {exc}.", field_errors={"secret": [str(exc)]}) from exc
    subscription = Subscription.objects.create(
        name=name,
        url=url,
        event_types=types,
        site=site,
        secret=secret,
        allow_private=allow_private,
        retry_window_seconds=retry_window_seconds or int(webhooks.RETRY_WINDOW.total_seconds()),
        created_by=actor,
    )
    return Created(subscription, secret)


@transaction.atomic
def subscription_update(
    *,
    subscription_id: UUID,
    url: str | None = None,
    event_types: Sequence[str] | None = None,
    site: Site | None | bool = False,
    active: bool | None = None,
    allow_private: bool | None = None,
    secret: str | None = None,
) -> Subscription:
    """Change what a subscription receives and where (`site=False`: unchanged, None: every site)."""
    subscription = Subscription.objects.select_for_update().filter(id=subscription_id).first()
    if subscription is None:
        raise NotFoundError(f"No subscription {subscription_id}.")
    new_url = url if url is not None else subscription.url
    new_private = allow_private if allow_private is not None else subscription.allow_private
    new_types = event_types if event_types is not None else subscription.event_types
    subscription.event_types = _checked(url=new_url, event_types=new_types, allow_private=new_private)
    subscription.url, subscription.allow_private = new_url, new_private
    if site is not False:
        subscription.site = site if isinstance(site, Site) else None
    if active is not None:
        subscription.active = active
    if secret is not None:
        try:
            webhooks.secret_key(secret)
        except ValueError as exc:
            raise FleetError(f"The secret is not usable: {exc}.", field_errors={"secret": [str(exc)]}) from exc
        subscription.secret = secret
    subscription.save()
    return subscription


@transaction.atomic
def subscription_delete(*, subscription_id: UUID) -> None:
    deleted, _ = Subscription.objects.filter(id=subscription_id).delete()
    if not deleted:
        raise NotFoundError(f"No subscription {subscription_id}.")


@transaction.atomic
def deliveries_redeliver(*, subscription_id: UUID, delivery_ids: Sequence[UUID] = ()) -> int:
    """Send these deliveries (none named: every failed one of the subscription) again now, with
    their original `webhook-id`; their retry window starts over. Returns how many."""
    deliveries = Delivery.objects.filter(subscription_id=subscription_id)
    if delivery_ids:
        deliveries = deliveries.filter(id__in=list(delivery_ids))
    else:
        deliveries = deliveries.filter(status=DeliveryStatus.FAILED)
    now = timezone.now()
    return deliveries.update(
        status=DeliveryStatus.SCHEDULED, next_attempt_at=now, created_at=now, leased_until=None, attempts=0
    )
