"""A device's hardware fingerprints: the current one first, each with what changed."""

from __future__ import annotations

from uuid import UUID

from drf_spectacular.utils import extend_schema
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from fleet.burnin.api.certificate_views import DEVICE_ID
from fleet.burnin.api.fingerprint_serializers import FingerprintHistorySerializer
from fleet.burnin.fingerprints import device_fingerprints
from fleet.core.schema import error_responses

TAGS = ["Certificates"]


class DeviceFingerprintsView(APIView):
    required_scopes = ["fleet:read"]
    required_permissions = ["burnin.view_fingerprintsnapshot"]

    @extend_schema(
        operation_id="api_v1_devices_fingerprints_retrieve",
        tags=TAGS,
        summary="A device's hardware fingerprints",
        description=(
            "The inventories the device's agent reported (GPUs, HCAs, host, driver), newest first (the current "
            "one first), each kept once per change of its SHA-256 with when it was first and last seen and what "
            "changed since the one before (`supersedes`: the hardware, firmware or driver is another, so a "
            "certificate binding the older one stopped holding). The newest 20; `truncated` when there are more."
        ),
        parameters=[DEVICE_ID],
        responses={200: FingerprintHistorySerializer, **error_responses(401, 403, 404)},
    )
    def get(self, request: Request, device_id: UUID) -> Response:
        return Response(FingerprintHistorySerializer(device_fingerprints(device_id=device_id, actor=request.user)).data)
