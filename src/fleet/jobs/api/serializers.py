from rest_framework import serializers

from fleet.core.fields import StrictCharField, StrictChoiceField, StrictIntegerField, StrictRegexField
from fleet.inventory.models import SLUG_PATTERN
from fleet.jobs.models import Job
from fleet_rules.vocabulary import JOB_OUTCOMES


class JobTopologySerializer(serializers.Serializer):
    id = serializers.UUIDField()
    unit = serializers.CharField()
    label = serializers.CharField()  # type: ignore[assignment]  # shadows Field.label, the caption


class JobDeviceSerializer(serializers.Serializer):
    id = serializers.UUIDField(source="device.id")
    hostname = serializers.CharField(source="device.hostname")
    resource_class = serializers.CharField(source="device.resource_class")
    active = serializers.BooleanField()


class JobSerializer(serializers.ModelSerializer):
    topology = JobTopologySerializer(allow_null=True)
    devices = JobDeviceSerializer(source="job_devices", many=True)
    parameters = serializers.JSONField(help_text="Requirements to run with their parameters, and the policy version.")

    class Meta:
        model = Job
        fields = [
            "id",
            "site",
            "satellite",
            "workflow_name",
            "status",
            "topology",
            "devices",
            "parameters",
            "requested_by",
            "reason",
            "claimed_at",
            "lease_expires_at",
            "finished_at",
            "failure_reason",
            "created_at",
            "updated_at",
        ]


class JobClaimRequestSerializer(serializers.Serializer):
    site_slug = StrictRegexField(SLUG_PATTERN, max_length=100)
    satellite_name = StrictCharField(max_length=100)
    capacity = StrictIntegerField(min_value=1, max_value=100, default=1, help_text="Most jobs to hand out.")


class JobClaimResponseSerializer(serializers.Serializer):
    jobs = JobSerializer(many=True)


class JobFinishRequestSerializer(serializers.Serializer):
    status = StrictChoiceField(choices=[outcome.value for outcome in JOB_OUTCOMES])
    reason = StrictCharField(required=False, allow_blank=True, default="", max_length=2000)
