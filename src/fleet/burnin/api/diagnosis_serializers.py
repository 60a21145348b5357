"""Serializers of the diagnosis endpoints (outliers, attempt history, culprit isolation)."""

from __future__ import annotations

from rest_framework import serializers

from fleet.core.fields import StrictCharField, StrictUUIDField
from fleet_rules.vocabulary import IsolationStatus, OutlierGroupReason, Verdict


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


# --- culprit isolation ------------------------------------------------------------------------------


class IsolationPlanRequestSerializer(serializers.Serializer):
    topology_id = StrictUUIDField(help_text="The rack (topology) whose cohort collective failed.")
    requirement = StrictCharField(max_length=100, help_text="The multi-node requirement that failed.")


class NamedDeviceSerializer(serializers.Serializer):
    device_id = serializers.UUIDField()
    hostname = serializers.CharField()


class IsolationSubsetSerializer(serializers.Serializer):
    suspects = NamedDeviceSerializer(many=True, help_text="The suspects this collective tests.")
    devices = NamedDeviceSerializer(many=True, help_text="The devices it runs on (suspects + a known-good one).")
    job_id = serializers.UUIDField(allow_null=True)
    execution_id = serializers.UUIDField(allow_null=True)
    verdict = serializers.ChoiceField(choices=Verdict.choices, allow_null=True, help_text="Null until decided.")


class IsolationRoundSerializer(serializers.Serializer):
    round = serializers.IntegerField(min_value=1)
    subsets = IsolationSubsetSerializer(many=True)


class IsolationPreviewSerializer(serializers.Serializer):
    topology_id = serializers.UUIDField()
    topology_label = serializers.CharField()
    requirement = serializers.CharField()
    cohort = NamedDeviceSerializer(many=True)
    max_rounds = serializers.IntegerField(help_text="⌈log2 n⌉ + 1 for an n-device cohort.")
    first_round = IsolationRoundSerializer()


class IsolationPlanSerializer(serializers.Serializer):
    id = serializers.UUIDField()
    site_id = serializers.UUIDField()
    topology_id = serializers.UUIDField()
    topology_label = serializers.CharField()
    requirement = serializers.CharField()
    policy_version = serializers.IntegerField()
    status = serializers.ChoiceField(choices=IsolationStatus.choices)
    cohort = NamedDeviceSerializer(many=True)
    max_rounds = serializers.IntegerField()
    rounds = IsolationRoundSerializer(many=True)
    suspects = NamedDeviceSerializer(many=True, help_text="Still under suspicion (in a group not yet narrowed).")
    known_good = NamedDeviceSerializer(many=True, help_text="Took part in a passing diagnostic collective.")
    culprits = NamedDeviceSerializer(many=True, help_text="Devices whose presence makes the collective fail.")
    unresolved = NamedDeviceSerializer(many=True, help_text="Suspects of groups that stopped narrowing.")
    created_at = serializers.DateTimeField()
    finished_at = serializers.DateTimeField(allow_null=True)


class DiagnosesQuerySerializer(serializers.Serializer):
    device = serializers.UUIDField(required=False)
    limit = serializers.IntegerField(min_value=1, max_value=500, default=100)


class DeviceDiagnosisSerializer(serializers.Serializer):
    device_id = serializers.UUIDField()
    hostname = serializers.CharField(source="device.hostname")
    topology_id = serializers.UUIDField()
    topology_label = serializers.CharField(source="topology.label")
    requirement = serializers.CharField(source="requirement.name")
    plan_id = serializers.UUIDField()
    finding = serializers.CharField()
    created_at = serializers.DateTimeField()


class DiagnosesSerializer(serializers.Serializer):
    results = DeviceDiagnosisSerializer(many=True, help_text="Newest first, at most `limit`.")


# --- attempt history --------------------------------------------------------------------------------


class AttemptsQuerySerializer(serializers.Serializer):
    requirement = serializers.CharField(max_length=100)
    target = serializers.UUIDField(help_text="A device id (single-node requirement) or a topology id (multi-node).")


class AttemptSerializer(serializers.Serializer):
    execution_id = serializers.UUIDField()
    status = serializers.CharField()
    verdict = serializers.ChoiceField(
        choices=Verdict.choices, allow_null=True, help_text="Null while running or not evaluated."
    )
    created_at = serializers.DateTimeField()
    finished_at = serializers.DateTimeField(allow_null=True)
    job_id = serializers.UUIDField(allow_null=True)


class AttemptSummarySerializer(serializers.Serializer):
    attempts = serializers.IntegerField(help_text="Judged attempts under the current policy version.")
    passed_after = serializers.IntegerField(
        allow_null=True, help_text="N in 'passed after N attempts' when the latest pass followed failures or errors."
    )
    consecutive_passes = serializers.IntegerField(help_text="Passes in a row at the end of the history.")
    flaky = serializers.BooleanField(help_text="The verdict changed between attempts under this policy version.")


class TargetAttemptsSerializer(serializers.Serializer):
    requirement = serializers.CharField()
    target_id = serializers.UUIDField()
    target = serializers.CharField(help_text="The device's hostname or the topology's label.")
    policy_version = serializers.IntegerField()
    consecutive_passes_required = serializers.IntegerField()
    attempts = AttemptSerializer(many=True, help_text="Oldest first.")
    summary = AttemptSummarySerializer()
