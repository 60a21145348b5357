"""Schemas of the webhooks' operations."""

from __future__ import annotations

from rest_framework import serializers

from fleet.core.fields import StrictBooleanField, StrictChoiceField, StrictIntegerField
from fleet_rules.vocabulary import DeliveryStatus, EventType


class SubscriptionRequestSerializer(serializers.Serializer):
    name = serializers.SlugField(max_length=100)
    url = serializers.URLField(max_length=2000, help_text="http(s); loopback/private targets need allow_private.")
    event_types = serializers.ListField(
        child=StrictChoiceField(choices=EventType.choices), required=False, default=list, max_length=len(EventType)
    )
    site = serializers.SlugField(required=False, allow_null=True, default=None, help_text="Only this site's events.")
    allow_private = StrictBooleanField(required=False, default=False)
    retry_window_seconds = StrictIntegerField(required=False, default=None, min_value=1, max_value=7 * 24 * 3600)


class SubscriptionUpdateSerializer(serializers.Serializer):
    url = serializers.URLField(max_length=2000, required=False)
    event_types = serializers.ListField(
        child=StrictChoiceField(choices=EventType.choices), required=False, max_length=len(EventType)
    )
    active = StrictBooleanField(required=False)
    allow_private = StrictBooleanField(required=False)


class SubscriptionSerializer(serializers.Serializer):
    id = serializers.UUIDField()
    name = serializers.CharField()
    url = serializers.CharField()
    event_types = serializers.ListField(child=serializers.ChoiceField(choices=EventType.choices))
    site = serializers.CharField(source="site.slug", allow_null=True, default=None)
    active = serializers.BooleanField()
    allow_private = serializers.BooleanField()
    retry_window_seconds = serializers.IntegerField()
    failing_since = serializers.DateTimeField(allow_null=True)
    created_at = serializers.DateTimeField()


class SubscriptionCreatedSerializer(SubscriptionSerializer):
    secret = serializers.CharField(help_text="whsec_…: shown once; receivers verify webhook-signature with it.")


class SubscriptionListSerializer(serializers.Serializer):
    results = SubscriptionSerializer(many=True)


class DeliverySerializer(serializers.Serializer):
    id = serializers.UUIDField()
    event_id = serializers.UUIDField()
    event_type = serializers.ChoiceField(choices=EventType.choices, source="event.type")
    subject = serializers.CharField(source="event.subject")
    status = serializers.ChoiceField(choices=DeliveryStatus.choices)
    attempts = serializers.IntegerField()
    created_at = serializers.DateTimeField()
    last_attempt_at = serializers.DateTimeField(allow_null=True)
    response_code = serializers.IntegerField(allow_null=True)
    latency_ms = serializers.IntegerField(allow_null=True)
    error = serializers.CharField()
    next_attempt_at = serializers.DateTimeField(allow_null=True)
    delivered_at = serializers.DateTimeField(allow_null=True)


class DeliveryLogSerializer(serializers.Serializer):
    results = DeliverySerializer(many=True)


class RedeliverRequestSerializer(serializers.Serializer):
    delivery_ids = serializers.ListField(
        child=serializers.UUIDField(), required=False, default=list, max_length=1000, help_text="None: every failed."
    )


class RedeliverResponseSerializer(serializers.Serializer):
    scheduled = serializers.IntegerField()


class StatusFilterSerializer(serializers.Serializer):
    status = StrictChoiceField(choices=DeliveryStatus.choices, required=False)
    limit = StrictIntegerField(required=False, default=100, min_value=1, max_value=500)
