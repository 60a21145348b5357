"""`GET /api/v1/devices/{id}/evidence-pack/`: the signed zip a vendor receives for a failed device
(docs/evidence-pack.md)."""

from __future__ import annotations

from collections.abc import Iterable
from uuid import UUID

from django.core.exceptions import ValidationError
from django.http import HttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework.negotiation import DefaultContentNegotiation
from rest_framework.renderers import BaseRenderer
from rest_framework.request import Request
from rest_framework.views import APIView

from fleet.burnin.evidence.pack import evidence_pack_build
from fleet.core.schema import error_responses
from fleet.inventory.identity import actor_label, ensure_not_satellite

DEVICE_ID = OpenApiParameter("device_id", OpenApiTypes.UUID, OpenApiParameter.PATH)
REPAIR = OpenApiParameter(
    "repair_id",
    OpenApiTypes.UUID,
    OpenApiParameter.QUERY,
    required=False,
    description="One of the device's repairs: the pack as of when it was recorded — the failed and errored "
    "targets that sent the device to repair, with their attempts (a device accepted since has none now).",
)


class _ZipOrJsonErrors(DefaultContentNegotiation):
    """The pack is a zip whatever the caller accepts; a refusal is the JSON `ErrorResponse` (so an
    `Accept: application/zip` caller is not answered 406, nor an error rendered as a zip)."""

    def select_renderer(
        self, request: Request, renderers: Iterable[BaseRenderer], format_suffix: str | None = None
    ) -> tuple[BaseRenderer, str]:
        first = next(iter(renderers))
        return first, first.media_type


class DeviceEvidencePackView(APIView):
    required_scopes = ["fleet:read"]
    required_permissions = ["burnin.view_testexecution", "inventory.view_device"]
    content_negotiation_class = _ZipOrJsonErrors

    @extend_schema(
        operation_id="api_v1_devices_evidence_pack_retrieve",
        tags=["Certificates"],
        summary="A device's signed evidence pack (zip) for its vendor",
        description=(
            "A zip: `manifest.json` (the device, its state history and repairs, every failed and errored target "
            "with its resolved thresholds, measured values and its attempts under the current policy version — "
            "the newest 20 a target — and every other file with its SHA-256), `executions/<id>.json` (each "
            "execution as `GET /api/v1/burn-in/executions/{id}/` serialises it) and `manifest.sig` (Ed25519 over "
            "the manifest's RFC 8785 bytes, with the id of the key that signs certificates). Operators and "
            "viewers (a session, or an operator client with `fleet:read`); a satellite's client is refused (403). "
            "`fleet evidence-pack verify` checks one offline."
        ),
        parameters=[DEVICE_ID, REPAIR],
        responses={
            (200, "application/zip"): OpenApiResponse(OpenApiTypes.BINARY, description="The signed evidence pack."),
            **error_responses(400, 401, 403, 404),
        },
    )
    def get(self, request: Request, device_id: UUID) -> HttpResponse:
        ensure_not_satellite(request.user, "Evidence packs are for operators: a satellite's client cannot fetch them.")
        repair = _repair_id(request.query_params.get(REPAIR.name))
        pack = evidence_pack_build(device_id=device_id, generated_by=actor_label(request.user), repair_id=repair)
        response = HttpResponse(pack.content, content_type="application/zip")
        # The name is built from letters, digits, `.`, `_` and `-` only (fleet_rules.evidence_pack).
        response["Content-Disposition"] = f'attachment; filename="{pack.file_name}"'
        response["Cache-Control"] = "no-store"
        response["X-Content-Type-Options"] = "nosniff"
        return response


def _repair_id(raw: str | None) -> UUID | None:
    if raw is None:
        return None
    try:
        return UUID(raw)
    except ValueError:
        raise ValidationError({REPAIR.name: ["Not a repair id (a UUID)."]}) from None
