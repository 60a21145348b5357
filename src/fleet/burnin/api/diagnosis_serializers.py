"""Serializers of the diagnosis endpoints (outliers, attempt history, culprit isolation)."""

from __future__ import annotations

from rest_framework import serializers

from fleet_rules.vocabulary import OutlierGroupReason


class OutliersQuerySerializer(serializers.Serializer):
    resource_class = serializers.CharField(max_length=255, required=False)
    requirement = serializers.CharField(max_length=100, required=False)
    limit = serializers.IntegerField(min_value=1, max_value=500, default=100)
    cursor = serializers.CharField(required=False)


class OutlierSerializer(serializers.Serializer):
    device_id = serializers.UUIDField()
    hostname = serializers.CharField()
    resource_class = serializers.CharField()
    requirement = serializers.CharField()
    metric = serializers.CharField()
    statistic = serializers.CharField(allow_null=True)
    value = serializers.FloatField()
    median = serializers.FloatField(help_text="The group's median.")
    mad = serializers.FloatField(help_text="The group's median absolute deviation.")
    robust_z = serializers.FloatField(help_text="0.6745 · (value − median) / mad.")
    k = serializers.FloatField(help_text="The |robust_z| beyond which the requirement calls a device an outlier.")


class OutlierGroupSerializer(serializers.Serializer):
    resource_class = serializers.CharField(source="key.resource_class")
    requirement = serializers.CharField(source="key.requirement")
    metric = serializers.CharField(source="key.metric")
    statistic = serializers.CharField(source="key.statistic", allow_null=True)
    comparator = serializers.CharField(source="key.comparator")
    k = serializers.FloatField(source="key.k")
    devices = serializers.IntegerField(source="verdict.size", help_text="Devices with a passing sample.")
    median = serializers.FloatField(source="verdict.median", allow_null=True)
    mad = serializers.FloatField(source="verdict.mad", allow_null=True)
    outliers = serializers.IntegerField(source="outlier_count")
    reason = serializers.ChoiceField(
        source="verdict.reason",
        choices=OutlierGroupReason.choices,
        allow_null=True,
        help_text="Why the group names no outlier (null when it names some).",
    )
    explanation = serializers.SerializerMethodField()

    def get_explanation(self, group) -> str | None:
        return group.explanation


class OutliersPageSerializer(serializers.Serializer):
    results = OutlierSerializer(source="items", many=True)
    next_cursor = serializers.CharField(allow_null=True, help_text="Null on the last page.")
    count = serializers.IntegerField(source="total", help_text="Outliers over every page.")
    groups = OutlierGroupSerializer(many=True, help_text="Every group looked at, and why one names none.")
