"""Serializers of the rules core's values that several apps' APIs render."""

from __future__ import annotations

from rest_framework import serializers

from fleet.core.fields import MetricDisplayValueField


# One rule of a threshold resolution (`fleet_rules.resolution`). No docstring: it would become the
# schema component's description.
class ResolvedRuleSerializer(serializers.Serializer):
    metric = serializers.CharField()
    statistic = serializers.CharField(allow_null=True)
    comparator = serializers.CharField()
    threshold = MetricDisplayValueField()
