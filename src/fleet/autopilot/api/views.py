"""The autopilot's log of a site, newest first (cursor-paginated, one statement per page)."""

from __future__ import annotations

from typing import Any
from uuid import UUID

from django.db.models import QuerySet
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework.generics import ListAPIView
from rest_framework.request import Request
from rest_framework.response import Response

from fleet.autopilot.api import serializers as s
from fleet.autopilot.models import AutopilotAction
from fleet.autopilot.selectors import site_log
from fleet.core.exceptions import NotFoundError
from fleet.core.pagination import FleetCursorPagination
from fleet.core.schema import error_responses
from fleet.inventory.identity import ensure_not_satellite, ensure_site_allowed
from fleet.inventory.models import Site


class LogPagination(FleetCursorPagination):
    ordering = ("-at", "-id")


class SiteAutopilotLogView(ListAPIView):
    serializer_class = s.AutopilotActionSerializer
    pagination_class = LogPagination
    required_scopes = ["fleet:read"]
    required_permissions = ["inventory.view_device"]
    filter_backends: list[type] = []

    def get_queryset(self) -> QuerySet[AutopilotAction]:
        if getattr(self, "swagger_fake_view", False):
            return AutopilotAction.objects.none()
        site_id: UUID = self.kwargs["site_id"]
        ensure_not_satellite(self.request.user)  # the autopilot is people's, as the breakers are
        site = Site.objects.filter(id=site_id).first()
        if site is None:
            raise NotFoundError(f"No site {site_id}.")
        ensure_site_allowed(self.request.user, site.id)
        return site_log(site)

    @extend_schema(
        operation_id="api_v1_burn_in_sites_autopilot_list",
        tags=["Autopilot"],
        summary="A site's autopilot log",
        description=(
            "What the site's bring-up autopilot did, newest first: each dispatch, rerun, culprit isolation and "
            "its rounds, renewal, and an operator's pause and resume — when, on which devices, the jobs it "
            "created, and why in words (docs/autopilot.md). Satellites' clients are refused."
        ),
        parameters=[OpenApiParameter("site_id", OpenApiTypes.UUID, OpenApiParameter.PATH)],
        responses={200: s.AutopilotActionSerializer(many=True), **error_responses(400, 401, 403, 404)},
    )
    def get(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        return super().get(request, *args, **kwargs)
