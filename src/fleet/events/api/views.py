"""The webhooks' operations: subscriptions (admins: they hold signing secrets and say where the
fleet's news goes), a subscription's delivery log, and redelivering."""

from __future__ import annotations

from uuid import UUID

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from fleet.core.exceptions import FleetError
from fleet.core.requests import validated
from fleet.core.schema import error_responses
from fleet.events import selectors
from fleet.events.api import serializers as s
from fleet.events.services import (
    deliveries_redeliver,
    subscription_create,
    subscription_delete,
    subscription_update,
)
from fleet.inventory.identity import actor_label, ensure_not_satellite
from fleet.inventory.models import Site
from fleet_rules.vocabulary import DeliveryStatus

TAGS = ["Webhooks"]
SUBSCRIPTION_ID = OpenApiParameter("subscription_id", OpenApiTypes.UUID, OpenApiParameter.PATH)
WHY = "A satellite's client cannot manage webhooks."


def _site(slug: str | None) -> Site | None:
    if slug is None:
        return None
    site = Site.objects.filter(slug=slug).first()
    if site is None:
        raise FleetError(f"No site {slug}.", field_errors={"site": [f"no site {slug}"]})
    return site


class SubscriptionsView(APIView):
    required_scopes = {"GET": ["fleet:read"], "POST": ["webhooks:manage"]}
    required_permissions = {"GET": ["events.view_subscription"], "POST": ["events.add_subscription"]}

    @extend_schema(
        operation_id="api_v1_webhooks_subscriptions_list",
        tags=TAGS,
        summary="Webhook subscriptions",
        responses={200: s.SubscriptionListSerializer, **error_responses(401, 403)},
    )
    def get(self, request: Request) -> Response:
        ensure_not_satellite(request.user, WHY)
        return Response(s.SubscriptionListSerializer({"results": list(selectors.subscriptions())}).data)

    @extend_schema(
        operation_id="api_v1_webhooks_subscriptions_create",
        tags=TAGS,
        summary="Subscribe a URL to events",
        description=(
            "Events (CloudEvents 1.0 JSON) of the given types (none: every type), of one site or all, are POSTed "
            "to the URL signed as Standard Webhooks specify (webhook-id, webhook-timestamp, webhook-signature). "
            "The secret (whsec_…) is in the answer, once. A URL resolving to a loopback, link-local or private "
            "address is refused (400) unless allow_private."
        ),
        request=s.SubscriptionRequestSerializer,
        responses={201: s.SubscriptionCreatedSerializer, **error_responses(400, 401, 403, 409)},
    )
    def post(self, request: Request) -> Response:
        ensure_not_satellite(request.user, WHY)
        data = validated(s.SubscriptionRequestSerializer, request)
        created = subscription_create(
            name=data["name"],
            url=data["url"],
            event_types=data["event_types"],
            site=_site(data["site"]),
            allow_private=data["allow_private"],
            retry_window_seconds=data["retry_window_seconds"],
            actor=actor_label(request.user),
        )
        body = s.SubscriptionCreatedSerializer(created.subscription).data
        return Response(body, status=status.HTTP_201_CREATED)


class SubscriptionView(APIView):
    required_scopes = {"GET": ["fleet:read"], "PATCH": ["webhooks:manage"], "DELETE": ["webhooks:manage"]}
    required_permissions = {
        "GET": ["events.view_subscription"],
        "PATCH": ["events.change_subscription"],
        "DELETE": ["events.delete_subscription"],
    }

    @extend_schema(
        operation_id="api_v1_webhooks_subscriptions_retrieve",
        tags=TAGS,
        summary="A webhook subscription",
        parameters=[SUBSCRIPTION_ID],
        responses={200: s.SubscriptionSerializer, **error_responses(401, 403, 404)},
    )
    def get(self, request: Request, subscription_id: UUID) -> Response:
        ensure_not_satellite(request.user, WHY)
        return Response(s.SubscriptionSerializer(selectors.subscription_get(subscription_id=subscription_id)).data)

    @extend_schema(
        operation_id="api_v1_webhooks_subscriptions_partial_update",
        tags=TAGS,
        summary="Change a webhook subscription",
        parameters=[SUBSCRIPTION_ID],
        request=s.SubscriptionUpdateSerializer,
        responses={200: s.SubscriptionSerializer, **error_responses(400, 401, 403, 404)},
    )
    def patch(self, request: Request, subscription_id: UUID) -> Response:
        ensure_not_satellite(request.user, WHY)
        data = validated(s.SubscriptionUpdateSerializer, request)
        subscription_update(subscription_id=subscription_id, **data)
        return Response(s.SubscriptionSerializer(selectors.subscription_get(subscription_id=subscription_id)).data)

    @extend_schema(
        operation_id="api_v1_webhooks_subscriptions_destroy",
        tags=TAGS,
        summary="Delete a webhook subscription (and its delivery log)",
        parameters=[SUBSCRIPTION_ID],
        responses={204: None, **error_responses(401, 403, 404)},
    )
    def delete(self, request: Request, subscription_id: UUID) -> Response:
        ensure_not_satellite(request.user, WHY)
        subscription_delete(subscription_id=subscription_id)
        return Response(status=status.HTTP_204_NO_CONTENT)


class DeliveriesView(APIView):
    required_scopes = ["fleet:read"]
    required_permissions = ["events.view_subscription"]

    @extend_schema(
        operation_id="api_v1_webhooks_subscriptions_deliveries_list",
        tags=TAGS,
        summary="A subscription's delivery log",
        description="Newest first: each event's delivery, its status, tries, last answer, latency and next try.",
        parameters=[
            SUBSCRIPTION_ID,
            OpenApiParameter("status", OpenApiTypes.STR, OpenApiParameter.QUERY, enum=DeliveryStatus.values),
            OpenApiParameter("limit", OpenApiTypes.INT, OpenApiParameter.QUERY, description="1-500 (100)."),
        ],
        responses={200: s.DeliveryLogSerializer, **error_responses(400, 401, 403, 404)},
    )
    def get(self, request: Request, subscription_id: UUID) -> Response:
        ensure_not_satellite(request.user, WHY)
        query = validated(s.StatusFilterSerializer, request, data=request.query_params)
        subscription = selectors.subscription_get(subscription_id=subscription_id)
        log = selectors.delivery_log(subscription, limit=query["limit"], status=query.get("status"))
        return Response(s.DeliveryLogSerializer({"results": log}).data)


class RedeliverView(APIView):
    required_scopes = ["webhooks:manage"]
    required_permissions = ["events.change_subscription"]

    @extend_schema(
        operation_id="api_v1_webhooks_subscriptions_redeliver_create",
        tags=TAGS,
        summary="Send deliveries again",
        description="The named deliveries (none: every failed one) are sent again now, with the same webhook-id.",
        parameters=[SUBSCRIPTION_ID],
        request=s.RedeliverRequestSerializer,
        responses={200: s.RedeliverResponseSerializer, **error_responses(400, 401, 403, 404)},
    )
    def post(self, request: Request, subscription_id: UUID) -> Response:
        ensure_not_satellite(request.user, WHY)
        data = validated(s.RedeliverRequestSerializer, request)
        subscription = selectors.subscription_get(subscription_id=subscription_id)
        scheduled = deliveries_redeliver(subscription_id=subscription.id, delivery_ids=data["delivery_ids"])
        return Response(s.RedeliverResponseSerializer({"scheduled": scheduled}).data)
