"""An execution as the API serialises it (`GET /api/v1/burn-in/executions/{id}/`): the one definition,
shared by the API and the evidence pack's `executions/<id>.json` files (which the pack command
writes without going through the API)."""

from __future__ import annotations

import re
from typing import Any

from rest_framework import serializers

from fleet.burnin.models import TestExecution
from fleet.core.fields import (
    MetricDisplayValueField,
    StrictCharField,
    StrictChoiceField,
    StrictDateTimeField,
    StrictIntegerField,
    StrictNumberField,
    StrictRegexField,
)
from fleet_rules import health_evidence as health_rules
from fleet_rules.vocabulary import FabricSource, HealthSource, ThrottleReason
from fleet_rules.xid import XidKind

#: A PCI address as the kernel log (`0000:3b:00`) or nvidia-smi (`00000000:3B:00.0`) writes it, or
#: whatever else the driver put between the parentheses of an Xid line: printable, at most 64
#: characters. Refusing an odd address would refuse the whole report, and with it a fatal Xid.
PCI_BUS_ID_PATTERN = r"^[^\x00-\x1f\x7f]{1,64}$"
COUNTER_NAME = re.compile(r"^[a-z][a-z0-9_]{0,63}$")
#: An InfiniBand port as the agent names it: the adapter as the kernel names it and the port number (`mlx5_0/1`,
#: `mlx5_bond_0/1`), or perfquery's LID and port (`lid75/1`, `lid75/all`).
FABRIC_PORT_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}/(?:[0-9]{1,3}|all)$"
#: A port state as sysfs names it (`ACTIVE`, `DOWN`, `INIT`, `ARMED`, `ACTIVE_DEFER`).
PORT_STATE_PATTERN = r"^[A-Z_]{1,20}$"


class MetricReadingSerializer(serializers.Serializer):
    """One metric of an execution: its value, unit and named statistics."""

    value = MetricDisplayValueField(allow_null=True, required=False)
    unit = StrictCharField(required=False, allow_blank=True, max_length=32)
    statistics = serializers.DictField(child=StrictNumberField(allow_null=True), required=False)


class HealthWindowSerializer(serializers.Serializer):
    """The job's window the events were read for."""

    since = StrictDateTimeField()
    until = StrictDateTimeField()

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        if attrs["until"] < attrs["since"]:
            raise serializers.ValidationError({"until": ["until is before since."]})
        return attrs


class XidEventSerializer(serializers.Serializer):
    """One kernel-logged GPU (Xid) or NVSwitch (SXid) event of the window. `message` is the logged
    text, kept as data (escaped wherever it is shown)."""

    kind = StrictChoiceField(choices=XidKind.choices)
    code = StrictIntegerField(min_value=0, max_value=health_rules.MAX_CODE)
    pci_bus_id = StrictRegexField(PCI_BUS_ID_PATTERN, max_length=64, required=False, allow_null=True, default=None)
    message = StrictCharField(required=False, allow_blank=True, default="", max_length=health_rules.MAX_MESSAGE)
    at = StrictDateTimeField(required=False, allow_null=True, default=None)


class CounterValuesField(serializers.DictField):
    """ECC / row-remap counters by name (`ecc_uncorrected_aggregate`: 0): numbers, null where the
    GPU does not say (N/A)."""

    child = StrictNumberField(allow_null=True)
    default_error_messages = {
        "too_many": f"At most {health_rules.MAX_ECC_COUNTERS} counters.",
        "bad_name": "Counter names are lower-case letters, digits and _ (at most 64), got {name!r}.",
    }

    def to_internal_value(self, data: Any) -> Any:
        if isinstance(data, dict):
            if len(data) > health_rules.MAX_ECC_COUNTERS:
                self.fail("too_many")
            for name in data:
                if not isinstance(name, str) or not COUNTER_NAME.fullmatch(name):  # `$` lets a final newline by
                    self.fail("bad_name", name=str(name)[:80])
        return super().to_internal_value(data)


class HealthEccSerializer(serializers.Serializer):
    """The device's ECC and row-remap counters read before and after the job (summed over GPUs)."""

    before = CounterValuesField(required=False, default=dict)
    after = CounterValuesField(required=False, default=dict)


class FabricPortSerializer(serializers.Serializer):
    """One InfiniBand port's state and error counters before and after the job."""

    port = StrictRegexField(FABRIC_PORT_PATTERN, max_length=70)
    state_before = StrictRegexField(PORT_STATE_PATTERN, max_length=20, required=False, allow_null=True, default=None)
    state_after = StrictRegexField(PORT_STATE_PATTERN, max_length=20, required=False, allow_null=True, default=None)
    before = CounterValuesField(required=False, default=dict)
    after = CounterValuesField(required=False, default=dict)
    saturated = serializers.ListField(
        child=StrictRegexField(COUNTER_NAME.pattern, max_length=64),
        required=False,
        default=list,
        max_length=health_rules.MAX_FABRIC_COUNTERS,
    )
    reset = serializers.ListField(
        child=StrictRegexField(COUNTER_NAME.pattern, max_length=64),
        required=False,
        default=list,
        max_length=health_rules.MAX_FABRIC_COUNTERS,
    )

    def validate_before(self, value: dict[str, Any]) -> dict[str, Any]:
        return _few_counters(value)

    def validate_after(self, value: dict[str, Any]) -> dict[str, Any]:
        return _few_counters(value)


def _few_counters(value: dict[str, Any]) -> dict[str, Any]:
    if len(value) > health_rules.MAX_FABRIC_COUNTERS:
        raise serializers.ValidationError(f"At most {health_rules.MAX_FABRIC_COUNTERS} counters a port.")
    return value


class HealthFabricSerializer(serializers.Serializer):
    """The device's InfiniBand ports' error counters read before and after the job (docs/agent.md, "Fabric
    deltas")."""

    # (the metaclass takes declared fields off the class: this `source` does not shadow Field.source)
    source = StrictChoiceField(choices=FabricSource.choices)  # type: ignore[assignment]
    ports = serializers.ListField(child=FabricPortSerializer(), max_length=health_rules.MAX_FABRIC_PORTS)

    def validate_ports(self, value: list[dict[str, Any]]) -> list[dict[str, Any]]:
        names = [port["port"] for port in value]
        if len(set(names)) != len(names):
            raise serializers.ValidationError("Each port at most once.")
        return value


class ExecutionHealthSerializer(serializers.Serializer):
    """Evidence of the execution's window: what the kernel logged, how the ECC and InfiniBand error counters
    moved, which throttle reasons the driver reported (docs/burn-in.md, "Health evidence")."""

    window = HealthWindowSerializer()
    # (the metaclass takes declared fields off the class: this `source` does not shadow Field.source)
    source = StrictChoiceField(choices=HealthSource.choices)  # type: ignore[assignment]
    xid_events = serializers.ListField(
        child=XidEventSerializer(), required=False, default=list, max_length=health_rules.MAX_EVENTS
    )
    ecc = HealthEccSerializer(required=False, default=dict)
    fabric = HealthFabricSerializer(required=False, allow_null=True, default=None)
    throttle_reasons_seen = serializers.ListField(
        child=StrictChoiceField(choices=ThrottleReason.choices),
        required=False,
        default=list,
        max_length=len(ThrottleReason),
    )

    def validate_throttle_reasons_seen(self, value: list[str]) -> list[str]:
        if len(set(value)) != len(value):
            raise serializers.ValidationError("Each throttle reason at most once.")
        return value


class TestExecutionSerializer(serializers.ModelSerializer):
    requirement = serializers.CharField(source="requirement.name")
    metrics = serializers.DictField(child=MetricReadingSerializer())
    parameters = serializers.JSONField()
    health = ExecutionHealthSerializer(allow_null=True, read_only=True)

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
            "health",
            "created_at",
            "updated_at",
        ]
