"""A device's hardware fingerprints: the current one first, each with what changed; and the
satellite's inventory sweep that reports them outside any job (satellites only, each its own)."""

from __future__ import annotations

from uuid import UUID

from django.utils import timezone
from drf_spectacular.utils import extend_schema
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from fleet.burnin.api.certificate_views import DEVICE_ID
from fleet.burnin.api.fingerprint_serializers import (
    FingerprintHistorySerializer,
    FingerprintSweepResponseSerializer,
    FingerprintSweepSerializer,
)
from fleet.burnin.fingerprints import device_fingerprints, satellite_fingerprints_report
from fleet.core.requests import validated
from fleet.core.schema import error_responses
from fleet.inventory.identity import ensure_satellite_client
from fleet.inventory.selectors import satellite_acting

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


class SatelliteFingerprintsView(APIView):
    required_scopes = ["test-execution:report"]
    required_permissions = ["burnin.add_testexecution"]

    @extend_schema(
        operation_id="api_v1_satellites_fingerprints_create",
        tags=["Satellites"],
        summary="Report the inventories of a satellite's devices, read outside any job",
        description=(
            "The agent's inventory sweep (docs/agent.md): the hardware fingerprints of up to 100 of the satellite's "
            "devices, read between jobs. Each is recorded as a job's inventory is (a new snapshot only when its "
            "SHA-256 moves); one that no longer matches the device's current certificate supersedes it "
            "(`hardware_changed`) and moves an accepted device back to burn-in. Every hostname must be one of the "
            "satellite's site (else a 400 naming it) and one the satellite serves (else a 403: another satellite's, or "
            "decommissioned), and nothing is written unless all are. Satellites' clients only, each for itself."
        ),
        request=FingerprintSweepSerializer,
        responses={200: FingerprintSweepResponseSerializer, **error_responses(400, 401, 403)},
    )
    def post(self, request: Request) -> Response:
        ensure_satellite_client(request.user)
        data = validated(FingerprintSweepSerializer, request)
        satellite = satellite_acting(
            site_slug=data["site_slug"], satellite_name=data["satellite_name"], actor=request.user
        )
        swept = satellite_fingerprints_report(
            satellite=satellite, devices=data["devices"], now=timezone.now(), actor=request.user
        )
        return Response(FingerprintSweepResponseSerializer({"results": swept}).data)
