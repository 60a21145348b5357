"""Schemas of the certificate endpoints. The certificate itself is served exactly as signed (the
JSON of its canonical bytes); these serializers document its shape."""

from __future__ import annotations

from rest_framework import serializers

from fleet.burnin.api.fingerprint_serializers import InventorySerializer
from fleet.core.fields import StrictBooleanField
from fleet.core.serializers import ResolvedRuleSerializer
from fleet_rules.certificates import FORMAT
from fleet_rules.vocabulary import RequirementScope, SupersedeReason


class CertificateSiteSerializer(serializers.Serializer):
    id = serializers.UUIDField()
    slug = serializers.CharField()


class CertificateDeviceSerializer(serializers.Serializer):
    id = serializers.UUIDField()
    hostname = serializers.CharField()
    serial = serializers.CharField()
    resource_class = serializers.CharField()
    site = CertificateSiteSerializer()


class CertificatePolicySerializer(serializers.Serializer):
    resource_class = serializers.CharField()
    version = serializers.IntegerField()


class CertificateTargetSerializer(serializers.Serializer):
    kind = serializers.ChoiceField(choices=[("device", "device"), ("topology", "topology")])
    id = serializers.UUIDField()
    label = serializers.CharField(  # type: ignore[assignment]  # shadows Field.label, the caption
        allow_null=True, help_text="The topology's label; null for the device itself."
    )


class CertificateExecutionSerializer(serializers.Serializer):
    id = serializers.UUIDField()
    test = serializers.CharField()
    parameters = serializers.JSONField()
    started_at = serializers.CharField(allow_null=True, help_text="UTC, `YYYY-MM-DDTHH:MM:SS.ffffffZ`.")
    finished_at = serializers.CharField(allow_null=True)
    metrics = serializers.JSONField()


class CertificateEvaluationSerializer(serializers.Serializer):
    passed = serializers.BooleanField()
    reason = serializers.CharField(allow_null=True)
    metric_evaluations = serializers.JSONField()


class CertificateRequirementSerializer(serializers.Serializer):
    name = serializers.CharField()
    gate = serializers.CharField()
    scope = serializers.ChoiceField(choices=RequirementScope.choices)
    target = CertificateTargetSerializer()
    execution = CertificateExecutionSerializer(help_text="The deciding execution.")
    evaluation = CertificateEvaluationSerializer()
    evaluation_source_key = serializers.RegexField(r"^[0-9a-f]{64}$")
    thresholds = ResolvedRuleSerializer(many=True, help_text="The resolved thresholds it was judged against.")
    evidence_valid_until = serializers.CharField(
        allow_null=True, help_text="When this pass stops counting (`evidence_valid_for`); null: never."
    )


class CertificateFingerprintSerializer(serializers.Serializer):
    """The hardware the certificate vouches for (`fleet_rules.fingerprint`)."""

    sha256 = serializers.RegexField(r"^[0-9a-f]{64}$", help_text="SHA-256 hex of the RFC 8785 form of `inventory`.")
    inventory = InventorySerializer()


class CertificateDocumentSerializer(serializers.Serializer):
    """The signed document (RFC 8785 canonical JSON of exactly this object is what is signed)."""

    format = serializers.ChoiceField(choices=[(FORMAT, FORMAT)])
    serial = serializers.UUIDField()
    device = CertificateDeviceSerializer()
    policy = CertificatePolicySerializer()
    requirements = CertificateRequirementSerializer(many=True)
    issued_at = serializers.CharField()
    valid_until = serializers.CharField(allow_null=True, help_text="The earliest expiry of its evidence; null: never.")
    previous_certificate_sha256 = serializers.CharField(
        allow_null=True, help_text="SHA-256 hex of the canonical bytes of the device's previous certificate."
    )
    fingerprint = CertificateFingerprintSerializer(
        allow_null=True,
        required=False,
        help_text="The hardware fingerprint it binds; null when the device reported none; absent from certificates "
        "issued before fingerprints.",
    )


class CertificateEnvelopeSerializer(serializers.Serializer):
    certificate = CertificateDocumentSerializer()
    signature = serializers.CharField(help_text="Base64 of the Ed25519 signature over the canonical bytes.")
    key_id = serializers.CharField(help_text="Which published key signed it (`GET /api/v1/certificates/keys/`).")


class CertificateHistoryEntrySerializer(serializers.Serializer):
    certificate = CertificateDocumentSerializer(source="envelope.certificate")
    signature = serializers.CharField(source="envelope.signature")
    key_id = serializers.CharField(source="envelope.key_id")
    sha256 = serializers.CharField()
    valid = serializers.BooleanField(help_text="Current and not past `valid_until`.")
    superseded_at = serializers.DateTimeField(allow_null=True)
    supersede_reason = serializers.ChoiceField(choices=SupersedeReason.choices, allow_null=True)


class CertificateHistorySerializer(serializers.Serializer):
    certificates = CertificateHistoryEntrySerializer(many=True, help_text="Newest first.")


class CertificateKeySerializer(serializers.Serializer):
    key_id = serializers.CharField()
    algorithm = serializers.ChoiceField(choices=[("Ed25519", "Ed25519")])
    public_key = serializers.CharField(help_text="Base64 of the 32 raw bytes.")


class CertificateKeysSerializer(serializers.Serializer):
    keys = CertificateKeySerializer(many=True)


class DeviceAcceptRequestSerializer(serializers.Serializer):
    force = StrictBooleanField(
        required=False,
        default=False,
        help_text="Accept without a valid certificate (needs `burnin.add_acceptanceoverride`; recorded).",
    )
    reason = serializers.CharField(
        required=False, default="", allow_blank=True, max_length=2000, help_text="Why (required with force)."
    )


class AcceptanceOverrideSerializer(serializers.Serializer):
    actor = serializers.CharField()
    reason = serializers.CharField()
    created_at = serializers.DateTimeField()


class DeviceAcceptResponseSerializer(serializers.Serializer):
    device_id = serializers.UUIDField(source="device.id")
    state = serializers.CharField(source="device.state")
    changed = serializers.BooleanField(help_text="False when the device was already accepted.")
    override = AcceptanceOverrideSerializer(allow_null=True, help_text="Set when acceptance was forced.")
