"""Schemas of the repairs' operations: recording a repair, a device's repairs, the repair queue and
the circuit breakers."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from fleet.core.fields import StrictCharField, StrictChoiceField
from fleet.lifecycle.models import Repair
from fleet_rules.vocabulary import DeviceState, RepairPartCheck, RepairRerun

#: Bounds of a repair record: a server has at most a few dozen replaceable parts.
MAX_PARTS = 64


class RepairPartSerializer(serializers.Serializer):
    kind = StrictCharField(max_length=64, help_text="gpu, hca, dimm, psu, board, cable, …")
    slot = StrictCharField(required=False, default="", allow_blank=True, max_length=64)
    removed_serial = StrictCharField(required=False, default="", allow_blank=True, max_length=128)
    installed_serial = StrictCharField(required=False, default="", allow_blank=True, max_length=128)


class RepairRequestSerializer(serializers.Serializer):
    summary = StrictCharField(max_length=2000, help_text="What was done.")
    parts = serializers.ListField(child=RepairPartSerializer(), required=False, default=list, max_length=MAX_PARTS)
    rerun = StrictChoiceField(
        choices=RepairRerun.choices,
        required=False,
        default=RepairRerun.ALL,
        help_text="all: the repaired device proves every requirement again; failed: only what failed.",
    )


class RepairSerializer(serializers.Serializer):
    id = serializers.UUIDField()
    device_id = serializers.UUIDField()
    summary = serializers.CharField()
    parts = RepairPartSerializer(many=True)
    actor = serializers.CharField()
    created_at = serializers.DateTimeField()
    rerun = serializers.ChoiceField(choices=RepairRerun.choices, source="rerun_mode")
    job_ids = serializers.ListField(child=serializers.UUIDField())


class RepairResponseSerializer(serializers.Serializer):
    repair = RepairSerializer()
    state = serializers.ChoiceField(choices=DeviceState.choices, source="device.state")
    job_ids = serializers.ListField(child=serializers.UUIDField(), source="repair.job_ids")
    skipped = serializers.ListField(
        child=serializers.CharField(),
        help_text="Why requirements of the re-burn-in were not dispatched (e.g. the satellite lacks the workflow).",
    )


class RepairPartCheckSerializer(serializers.Serializer):
    """One repaired part against the first hardware fingerprint read after the repair."""

    kind = serializers.CharField()
    slot = serializers.CharField(allow_blank=True)
    outcome = serializers.ChoiceField(choices=RepairPartCheck.choices)
    mismatch = serializers.BooleanField(help_text="The hardware read after the repair contradicts the record.")
    text = serializers.CharField(help_text="The check in words.")


class ListedRepairSerializer(RepairSerializer):
    hardware_check = serializers.SerializerMethodField(
        help_text="Each part against the first fingerprint the device reported after the repair: its installed "
        "serial reported (`installed_seen`) or not (`installed_not_seen`, a mismatch), its removed serial still "
        "reported (`removed_still_seen`, a mismatch), nothing to check, or no fingerprint read since."
    )

    @extend_schema_field(RepairPartCheckSerializer(many=True))
    def get_hardware_check(self, repair: Repair) -> Any:
        checks = self.context.get("hardware_checks", {}).get(repair.id, [])
        return RepairPartCheckSerializer(checks, many=True).data


class RepairListSerializer(serializers.Serializer):
    results = ListedRepairSerializer(many=True, help_text="Newest first, at most 100.")


class RepairQueueEntrySerializer(serializers.Serializer):
    device_id = serializers.UUIDField()
    hostname = serializers.CharField()
    serial = serializers.CharField()
    resource_class = serializers.CharField()
    since = serializers.DateTimeField(help_text="When it went to needs_repair.")
    cause = serializers.CharField(help_text="failed_too_often, isolation, fatal_xid, operator or fleet_file.")
    reason = serializers.CharField()
    requirement = serializers.CharField(allow_null=True)
    failures = serializers.IntegerField(allow_null=True, help_text="Failures since its last repair.")
    execution_id = serializers.UUIDField(
        allow_null=True, help_text="The failing execution that sent it (for fatal_xid: the one whose window logged it)."
    )
    measured = serializers.CharField(allow_null=True, help_text="That execution's failing rule: measured vs threshold.")


class RepairQueueSerializer(serializers.Serializer):
    results = RepairQueueEntrySerializer(many=True, help_text="Oldest first.")
    more = serializers.BooleanField(help_text="More devices wait than this page shows (at most `limit`).")


class BreakerSerializer(serializers.Serializer):
    id = serializers.UUIDField()
    resource_class = serializers.CharField()
    open = serializers.BooleanField()
    opened_at = serializers.DateTimeField()
    detail = serializers.CharField()
    closed_at = serializers.DateTimeField(allow_null=True)
    closed_by = serializers.CharField()
    close_reason = serializers.CharField()
    held = serializers.IntegerField(help_text="Automatic moves to repair it held while open.")


class BreakersSerializer(serializers.Serializer):
    results = BreakerSerializer(many=True, help_text="Open ones first, then the newest closed, at most 100.")


class BreakerResetRequestSerializer(serializers.Serializer):
    reason = StrictCharField(max_length=2000, help_text="Why it is safe to let automatic moves through again.")


class BreakerResetResponseSerializer(serializers.Serializer):
    breaker = BreakerSerializer()
    moved = serializers.ListField(child=serializers.UUIDField(), help_text="Held devices sent to repair now.")
    held = serializers.ListField(child=serializers.UUIDField(), help_text="Held again (the breaker tripped again).")
