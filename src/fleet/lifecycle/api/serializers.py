"""Schemas of the lifecycle endpoints."""

from __future__ import annotations

from rest_framework import serializers

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
