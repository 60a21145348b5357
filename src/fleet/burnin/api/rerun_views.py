"""Rerun planning endpoints: preview and dispatch (the spec's third operation)."""

from __future__ import annotations

from uuid import UUID

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from fleet.burnin.api import serializers as s
from fleet.burnin.reruns.service import rerun_dispatch, rerun_plan_preview
from fleet.burnin.selectors import site_get
from fleet.core.heap import CollectorPausedView
from fleet.core.requests import validated
from fleet.core.schema import error_responses
from fleet.inventory.identity import actor_label
from fleet_rules.vocabulary import PlanningMode

SITE_ID = OpenApiParameter("site_id", OpenApiTypes.UUID, OpenApiParameter.PATH, description="Site identifier.")
ERRORS = error_responses(
    400, 401, 403, 404, bad_request="Device ids not part of the site.", not_found="Unknown site_id."
)


class _RerunView(CollectorPausedView, APIView):
    required_scopes = ["job:create"]
    required_permissions = ["jobs.add_job"]


class RerunPlanPreviewView(_RerunView):
    @extend_schema(
        operation_id="api_v1_burn_in_sites_rerun_plans_create",
        tags=["Burn-in"],
        summary="Preview policy-aware burn-in reruns",
        description="The same calculation as dispatch, with nothing created.",
        parameters=[SITE_ID],
        request=s.RerunPlanDispatchRequestSerializer,
        responses={200: s.RerunPlanPreviewResponseSerializer, **ERRORS},
    )
    def post(self, request: Request, site_id: UUID) -> Response:
        site = site_get(site_id=site_id, actor=request.user)
        data = validated(s.RerunPlanDispatchRequestSerializer, request)
        outcome = rerun_plan_preview(site=site, device_ids=data["device_ids"], mode=PlanningMode(data["mode"]))
        return Response(s.RerunPlanPreviewResponseSerializer(outcome).data)


class RerunPlanDispatchView(_RerunView):
    @extend_schema(
        operation_id="api_v1_burn_in_sites_rerun_plans_dispatch",
        tags=["Burn-in"],
        summary="Dispatch policy-aware burn-in reruns",
        description=(
            "Calculate and dispatch safe reruns through the standard Job path.\n"
            "Multi-node reruns currently cover the rack-acceptance gate only."
        ),
        parameters=[SITE_ID],
        request=s.RerunPlanDispatchRequestSerializer,
        responses={200: s.RerunPlanDispatchResponseSerializer, **ERRORS},
    )
    def post(self, request: Request, site_id: UUID) -> Response:
        site = site_get(site_id=site_id, actor=request.user)
        data = validated(s.RerunPlanDispatchRequestSerializer, request)
        outcome = rerun_dispatch(
            site=site,
            device_ids=data["device_ids"],
            mode=PlanningMode(data["mode"]),
            requested_by=actor_label(request.user),
        )
        return Response(s.RerunPlanDispatchResponseSerializer(outcome).data)
