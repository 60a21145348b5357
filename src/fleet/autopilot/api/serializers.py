"""Schemas of the autopilot's log."""

from __future__ import annotations

from rest_framework import serializers

from fleet.autopilot.models import AutopilotAction
from fleet_rules.vocabulary import AutopilotActionKind


class AutopilotActionSerializer(serializers.ModelSerializer):
    kind = serializers.ChoiceField(choices=AutopilotActionKind.choices)
    reason = serializers.CharField(help_text="Why, in words: what the autopilot saw and what it did.")
    device_ids = serializers.ListField(child=serializers.UUIDField(), help_text="The devices it acted on.")
    hostnames = serializers.ListField(child=serializers.CharField(), help_text="Their hostnames, in the same order.")
    job_ids = serializers.ListField(child=serializers.UUIDField(), help_text="The jobs it created.")
    actor = serializers.CharField(help_text="The leader process (autopilot@host:pid), or the person who paused.")

    class Meta:
        model = AutopilotAction
        fields = ["id", "at", "kind", "reason", "device_ids", "hostnames", "job_ids", "actor"]
