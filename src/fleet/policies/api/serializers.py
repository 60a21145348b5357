from rest_framework import serializers

from fleet.core.fields import MetricDisplayValueField
from fleet.core.serializers import ResolvedRuleSerializer
from fleet.policies.models import AcceptancePolicy, ParameterProfile, Requirement, ThresholdRule


class ThresholdRuleSerializer(serializers.ModelSerializer):
    threshold = MetricDisplayValueField()
    site_slug = serializers.CharField(source="site.slug", read_only=True, allow_null=True, default=None)

    class Meta:
        model = ThresholdRule
        fields = ["id", "metric", "statistic", "comparator", "threshold", "site", "site_slug"]


class RequirementSerializer(serializers.ModelSerializer):
    thresholds = ThresholdRuleSerializer(many=True, read_only=True)
    parameter_constraints = serializers.JSONField()

    class Meta:
        model = Requirement
        fields = [
            "id",
            "name",
            "gate",
            "scope",
            "unit",
            "test",
            "rerunnable",
            "parameter_constraints",
            "retired_at",
            "thresholds",
        ]


class AcceptancePolicySerializer(serializers.ModelSerializer):
    requirements = RequirementSerializer(many=True, read_only=True)

    class Meta:
        model = AcceptancePolicy
        fields = [
            "id",
            "resource_class",
            "description",
            "gpu_vendor",
            "version",
            "requirements",
            "created_at",
            "updated_at",
        ]


class ParameterProfileSerializer(serializers.ModelSerializer):
    parameters = serializers.JSONField()

    class Meta:
        model = ParameterProfile
        fields = ["id", "resource_class", "test", "name", "parameters", "created_at"]


class ResolvedThresholdsQuerySerializer(serializers.Serializer):
    requirement = serializers.UUIDField()
    site = serializers.UUIDField()


class ResolvedThresholdsSerializer(serializers.Serializer):
    requirement_id = serializers.UUIDField()
    requirement_name = serializers.CharField()
    site_id = serializers.UUIDField()
    policy_version = serializers.IntegerField()
    rules = ResolvedRuleSerializer(source="resolution.rules_list", many=True)
    canonical_json = serializers.CharField(help_text="The exact bytes hashed into the key (UTF-8).")
    evaluation_source_key = serializers.CharField(source="resolution.key", help_text="SHA-256 hex of canonical_json.")
