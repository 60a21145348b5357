"""Certificate endpoints: a device's valid certificate, its history, the published keys."""

from __future__ import annotations

from uuid import UUID

from django.shortcuts import get_object_or_404
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from fleet.burnin.api import certificate_serializers as s
from fleet.burnin.certificates.acceptance import OVERRIDE_PERMISSION, device_accept
from fleet.burnin.certificates.reads import certificate_keys, device_certificate, device_certificates, envelope
from fleet.core.exceptions import PermissionDeniedError
from fleet.core.permissions import acting_person
from fleet.core.requests import validated
from fleet.core.schema import error_responses
from fleet.inventory.identity import actor_label, ensure_site_allowed
from fleet.inventory.models import Device

TAGS = ["Certificates"]
DEVICE_ID = OpenApiParameter("device_id", OpenApiTypes.UUID, OpenApiParameter.PATH)


class DeviceCertificateView(APIView):
    required_scopes = ["fleet:read"]
    required_permissions = ["burnin.view_acceptancecertificate"]

    @extend_schema(
        operation_id="api_v1_devices_certificate_retrieve",
        tags=TAGS,
        summary="A device's valid acceptance certificate",
        description=(
            "The device's current certificate (not superseded, not past `valid_until`) exactly as signed, "
            "its Ed25519 signature and the id of the key that made it. 404 when it holds none."
        ),
        parameters=[DEVICE_ID],
        responses={200: s.CertificateEnvelopeSerializer, **error_responses(401, 403, 404)},
    )
    def get(self, request: Request, device_id: UUID) -> Response:
        # The document is served as signed, not re-rendered through a serializer.
        return Response(envelope(device_certificate(device_id=device_id, actor=request.user)))


class DeviceCertificatesView(APIView):
    required_scopes = ["fleet:read"]
    required_permissions = ["burnin.view_acceptancecertificate"]

    @extend_schema(
        operation_id="api_v1_devices_certificates_retrieve",
        tags=TAGS,
        summary="Every certificate a device held",
        description="Newest first; superseded ones with when and why.",
        parameters=[DEVICE_ID],
        responses={200: s.CertificateHistorySerializer, **error_responses(401, 403, 404)},
    )
    def get(self, request: Request, device_id: UUID) -> Response:
        history = device_certificates(device_id=device_id, actor=request.user)
        return Response(s.CertificateHistorySerializer({"certificates": history}).data)


class CertificateKeysView(APIView):
    required_scopes = ["fleet:read"]
    required_permissions = ["burnin.view_certificatekey"]

    @extend_schema(
        operation_id="api_v1_certificates_keys_retrieve",
        tags=TAGS,
        summary="Public keys that signed certificates",
        description="Every key that ever signed, so certificates signed before a key rotation still verify.",
        responses={200: s.CertificateKeysSerializer, **error_responses(401, 403)},
    )
    def get(self, request: Request) -> Response:
        return Response(s.CertificateKeysSerializer({"keys": certificate_keys()}).data)


class DeviceAcceptView(APIView):
    required_scopes = ["job:create"]
    required_permissions = ["inventory.change_device"]

    @extend_schema(
        operation_id="api_v1_devices_accept_create",
        tags=TAGS,
        summary="Move a device to lifecycle state accepted",
        description=(
            "Refused (409) unless the device holds a valid acceptance certificate. `force` with a `reason` "
            "overrides (people need `burnin.add_acceptanceoverride`); the override is recorded with who and why."
        ),
        parameters=[DEVICE_ID],
        request=s.DeviceAcceptRequestSerializer,
        responses={200: s.DeviceAcceptResponseSerializer, **error_responses(400, 401, 403, 404, 409)},
    )
    def post(self, request: Request, device_id: UUID) -> Response:
        data = validated(s.DeviceAcceptRequestSerializer, request)
        device = get_object_or_404(Device, id=device_id)
        ensure_site_allowed(request.user, device.site_id)
        person = acting_person(request)  # None (a satellite's client) may never force
        if data["force"] and (person is None or not person.has_perm(OVERRIDE_PERMISSION)):
            raise PermissionDeniedError(f"Forcing an acceptance needs the {OVERRIDE_PERMISSION} permission.")
        accepted = device_accept(
            device_id=device.id, actor=actor_label(request.user), force=data["force"], reason=data["reason"]
        )
        return Response(s.DeviceAcceptResponseSerializer(accepted).data)
