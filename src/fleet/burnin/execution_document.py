"""An execution as the API serialises it (`GET /api/v1/burn-in/executions/{id}/`): the one definition,
shared by the API and the evidence pack's `executions/<id>.json` files (which the pack command
writes without going through the API)."""

from __future__ import annotations

from rest_framework import serializers

from fleet.burnin.models import TestExecution
from fleet.core.fields import MetricDisplayValueField, StrictCharField, StrictNumberField


class MetricReadingSerializer(serializers.Serializer):
    """One metric of an execution: its value, unit and named statistics."""

    value = MetricDisplayValueField(allow_null=True, required=False)
    unit = StrictCharField(required=False, allow_blank=True, max_length=32)
    statistics = serializers.DictField(child=StrictNumberField(allow_null=True), required=False)


class TestExecutionSerializer(serializers.ModelSerializer):
    requirement = serializers.CharField(source="requirement.name")
    metrics = serializers.DictField(child=MetricReadingSerializer())
    parameters = serializers.JSONField()

    class Meta:
        model = TestExecution
        fields = [
            "id",
            "site",
            "requirement",
            "test",
            "device",
            "topology",
            "job",
            "status",
            "parameters",
            "metrics",
            "error",
            "started_at",
            "finished_at",
            "created_at",
            "updated_at",
        ]
