"""The hardware fingerprint on the wire: the `inventory` an agent reports with a single-device
execution (validated strictly: text from machines under test is hostile), and the snapshots the
API reads back."""

from __future__ import annotations

from typing import Any

from django.core.validators import RegexValidator
from rest_framework import serializers
from rest_framework.exceptions import ValidationError

from fleet.core.fields import StrictCharField, StrictIntegerField, StrictNumberField

#: How much one inventory may hold (a node has 8 GPUs and 8–10 HCAs today).
MAX_GPUS = 64
MAX_HCAS = 32
MAX_PORTS = 16
MAX_MISSING = 32
MAX_TEXT = 256
MAX_MISSING_TEXT = 500
#: Devices one inventory sweep request carries (`fleet.burnin.fingerprints.MAX_BATCH`).
MAX_SWEEP = 100

#: One line of printable text: no control characters (NUL included), no line breaks.
_PRINTABLE = RegexValidator(r"^[^\x00-\x1f\x7f]*\Z", "Control characters are not allowed.")


def _text(*, max_length: int = MAX_TEXT, null: bool = True, help_text: str = "") -> StrictCharField:
    """A reading: printable, bounded, not blank (null says it could not be read)."""
    return StrictCharField(
        max_length=max_length,
        allow_null=null,
        allow_blank=False,
        trim_whitespace=False,
        validators=[_PRINTABLE],
        help_text=help_text,
    )


class _Closed(serializers.Serializer):
    """Refuses members it does not know: a misspelt member is a 400, not a reading lost."""

    def to_internal_value(self, data: Any) -> Any:
        if isinstance(data, dict):
            unknown = sorted(set(map(str, data)) - set(self.fields))
            if unknown:
                raise ValidationError({name: ["Unknown member."] for name in unknown})
        return super().to_internal_value(data)


class InventoryGpuSerializer(_Closed):
    """One GPU as `nvidia-smi -q -x` lists it; null where it could not be read."""

    uuid = _text()
    serial = _text()
    pci_bus_id = _text()
    vbios_version = _text()
    part_number = _text()
    product_name = _text()


class InventoryPortSerializer(_Closed):
    port = StrictIntegerField(min_value=1, max_value=255)
    state = _text(max_length=32)
    rate_gbps = StrictNumberField(min_value=0, max_value=100000, allow_null=True)


class InventoryHcaSerializer(_Closed):
    """One InfiniBand HCA as `ibstat` lists it."""

    name = _text(max_length=64, null=False)
    firmware_version = _text()
    node_guid = _text()
    ports = serializers.ListField(child=InventoryPortSerializer(), max_length=MAX_PORTS)


class InventoryHostSerializer(_Closed):
    bios_version = _text()
    system_serial = _text()


class InventorySerializer(_Closed):
    """The hardware fingerprint of the device, read at the start of the execution's job. Every
    member is required (null or empty where nothing could be read, with why in `missing`)."""

    driver_version = _text(max_length=64)
    cuda_version = _text(max_length=32)
    gpus = serializers.ListField(
        child=InventoryGpuSerializer(), max_length=MAX_GPUS, help_text="In the order nvidia-smi lists them."
    )
    hcas = serializers.ListField(child=InventoryHcaSerializer(), max_length=MAX_HCAS)
    host = InventoryHostSerializer()
    missing = serializers.ListField(
        child=_text(max_length=MAX_MISSING_TEXT, null=False),
        max_length=MAX_MISSING,
        help_text="Each part that could not be read, with why.",
    )

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        names = [hca["name"] for hca in attrs["hcas"]]
        problems = {
            f"hcas.{i}.name": ["The same HCA name appears more than once."]
            for i, name in enumerate(names)
            if names.count(name) > 1
        }
        for i, hca in enumerate(attrs["hcas"]):
            ports = [p["port"] for p in hca["ports"]]
            problems |= {
                f"hcas.{i}.ports.{j}.port": ["The same port appears more than once."]
                for j, port in enumerate(ports)
                if ports.count(port) > 1
            }
        buses = [g["pci_bus_id"] for g in attrs["gpus"] if g["pci_bus_id"] is not None]
        problems |= {
            f"gpus.{i}.pci_bus_id": ["The same PCI bus id appears more than once."]
            for i, gpu in enumerate(attrs["gpus"])
            if gpu["pci_bus_id"] is not None and buses.count(gpu["pci_bus_id"]) > 1
        }
        if problems:
            raise ValidationError(problems)
        return attrs


# --- reads -----------------------------------------------------------------------------------------


class FingerprintChangeSerializer(serializers.Serializer):
    part = serializers.CharField()
    text = serializers.CharField(help_text="What changed, in words (e.g. `GPU 3 (…) serial 1652… → 1653…`).")
    supersedes = serializers.BooleanField(
        help_text="The hardware, its firmware or driver is another: a certificate binding the older one stops holding."
    )


class FingerprintSnapshotSerializer(serializers.Serializer):
    id = serializers.UUIDField()
    sha256 = serializers.CharField(help_text="SHA-256 hex of the RFC 8785 form of `inventory`.")
    inventory = InventorySerializer()
    current = serializers.BooleanField()
    first_seen_at = serializers.DateTimeField()
    last_seen_at = serializers.DateTimeField()
    first_execution_id = serializers.UUIDField(allow_null=True)
    last_execution_id = serializers.UUIDField(allow_null=True)
    reports = serializers.IntegerField(min_value=1)
    changes = FingerprintChangeSerializer(many=True, help_text="Since the snapshot before it (empty for the first).")


class FingerprintHistorySerializer(serializers.Serializer):
    fingerprints = FingerprintSnapshotSerializer(many=True, help_text="Newest first; the current one first.")
    truncated = serializers.BooleanField(help_text="Older snapshots exist beyond those listed.")


# --- the agent's inventory sweep (satellites only) --------------------------------------------------


class SweptInventorySerializer(_Closed):
    hostname = StrictCharField(max_length=255, validators=[_PRINTABLE])
    inventory = InventorySerializer()


class FingerprintSweepSerializer(_Closed):
    """What a satellite's inventory sweep read: its devices' inventories outside any job."""

    site_slug = serializers.RegexField(r"^[-a-zA-Z0-9_]+$", max_length=100)
    satellite_name = StrictCharField(max_length=100)
    devices = serializers.ListField(
        child=SweptInventorySerializer(), min_length=1, max_length=MAX_SWEEP, help_text=f"At most {MAX_SWEEP}."
    )

    def validate_devices(self, devices: list[dict[str, Any]]) -> list[dict[str, Any]]:
        hostnames = [d["hostname"] for d in devices]
        problems = {
            f"{i}.hostname": ["The same hostname appears more than once."]
            for i, hostname in enumerate(hostnames)
            if hostnames.count(hostname) > 1
        }
        if problems:
            raise ValidationError(problems)
        return devices


class SweptDeviceSerializer(serializers.Serializer):
    hostname = serializers.CharField()
    device_id = serializers.UUIDField()
    sha256 = serializers.CharField(help_text="SHA-256 hex of the RFC 8785 form of the inventory.")
    created = serializers.BooleanField(help_text="A new snapshot: the fingerprint changed (or was the first).")
    superseded = serializers.UUIDField(
        allow_null=True, help_text="The certificate this inventory superseded (hardware_changed), or null."
    )


class FingerprintSweepResponseSerializer(serializers.Serializer):
    results = SweptDeviceSerializer(many=True)
