"""Schemas of the lifecycle's operations: a device's history, an operator's transition, and the node
states a satellite's gate reads."""

from __future__ import annotations

from rest_framework import serializers

from fleet.core.fields import StrictBooleanField, StrictCharField, StrictChoiceField
from fleet.lifecycle.models import DeviceStateChange
from fleet_rules.vocabulary import DeviceState, TransitionCause


class DeviceStateChangeSerializer(serializers.ModelSerializer):
    from_state = serializers.ChoiceField(choices=DeviceState.choices)
    to_state = serializers.ChoiceField(choices=DeviceState.choices)
    cause = serializers.ChoiceField(choices=TransitionCause.choices)
    held = serializers.BooleanField(help_text="An automatic move the circuit breaker held: the state did not change.")
    actor = serializers.CharField(help_text="user:NAME for a person, the client's name, or system.")
    refs = serializers.DictField(
        help_text="Ids the change refers to: certificate, supersede_reason, repair, diagnosis, requirement, jobs."
    )

    class Meta:
        model = DeviceStateChange
        fields = ["id", "from_state", "to_state", "at", "actor", "cause", "held", "reason", "refs"]


class TransitionRequestSerializer(serializers.Serializer):
    to = StrictChoiceField(choices=DeviceState.choices, help_text="The state to move the device to.")
    reason = StrictCharField(required=False, default="", allow_blank=True, max_length=2000)
    force = StrictBooleanField(
        required=False,
        default=False,
        help_text="Into accepted or in_service without a valid certificate (needs `burnin.add_acceptanceoverride` "
        "and a reason; recorded).",
    )


class TransitionResponseSerializer(serializers.Serializer):
    device_id = serializers.UUIDField(source="device.id")
    state = serializers.ChoiceField(choices=DeviceState.choices, source="device.state")
    change = DeviceStateChangeSerializer()


# --- the node gate's read (satellites only) --------------------------------------------------------


class NodeStatesQuerySerializer(serializers.Serializer):
    site_slug = serializers.RegexField(r"^[-a-zA-Z0-9_]+$", max_length=100)
    satellite_name = serializers.CharField(max_length=100)
    limit = serializers.IntegerField(min_value=1, max_value=500, default=500)
    cursor = serializers.CharField(required=False, allow_null=True, allow_blank=True)


class NodeStateSerializer(serializers.Serializer):
    device_id = serializers.UUIDField()
    hostname = serializers.CharField()
    state = serializers.ChoiceField(choices=DeviceState.choices)
    why = serializers.CharField(
        allow_blank=True,
        help_text="In needs_repair: why, from the change that sent it there (at most 200 characters); else empty.",
    )
    since = serializers.DateTimeField(allow_null=True, help_text="In needs_repair: since when; else null.")
    resource_class = serializers.CharField(help_text="The device's resource class (what the inventory sweep reads by).")


class NodeStatesPageSerializer(serializers.Serializer):
    results = NodeStateSerializer(source="items", many=True)
    next_cursor = serializers.CharField(allow_null=True, help_text="Null on the last page.")
