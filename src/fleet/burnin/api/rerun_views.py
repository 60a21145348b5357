"""Rerun planning endpoints: preview and dispatch (the spec's third operation)."""

from __future__ import annotations

from django.shortcuts import get_object_or_404
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from fleet.burnin.api import serializers as s
from fleet.burnin.rerun_dispatch import DispatchOutcome, rerun_dispatch, rerun_plan_preview
from fleet.core.error_schema import ERROR_DESCRIPTIONS
from fleet.core.principals import actor_label, ensure_site_allowed
from fleet.core.requests import validated
from fleet.inventory.models import Site

SITE_ID = OpenApiParameter("site_id", OpenApiTypes.UUID, OpenApiParameter.PATH, description="Site identifier.")
ERRORS = {
    400: "Device ids not part of the site.",
    401: ERROR_DESCRIPTIONS[401],
    403: ERROR_DESCRIPTIONS[403],
    404: "Unknown site_id.",
}


def _topology(outcome: DispatchOutcome, topology_id) -> dict | None:
    if topology_id is None:
        return None
    topology = outcome.topologies[topology_id]
    return {"id": topology.id, "unit": topology.unit, "label": topology.label}


def _skips_and_exclusions(outcome: DispatchOutcome) -> dict:
    return {
        "skips": [
            {
                "device_ids": list(group.device_ids),
                "topology": _topology(outcome, group.topology_id),
                "resource_class": group.resource_class,
                "requirement_name": group.requirement_name,
                "reason": group.reason,
            }
            for group in outcome.plan.skips
        ],
        "excluded_devices": [{"device_id": e.device_id, "reason": e.reason} for e in outcome.plan.exclusions],
    }


class _RerunView(APIView):
    required_scopes = ["job:create"]
    required_permissions = ["jobs.add_job"]
    error_responses = ERRORS

    def site(self, request: Request, site_id) -> Site:
        site = get_object_or_404(Site, id=site_id)
        ensure_site_allowed(request.user, site.id)
        return site


class RerunPlanPreviewView(_RerunView):
    @extend_schema(
        operation_id="api_v1_burn_in_sites_rerun_plans_create",
        tags=["Burn-in"],
        summary="Preview policy-aware burn-in reruns",
        description="The same calculation as dispatch, with nothing created.",
        parameters=[SITE_ID],
        request=s.RerunPlanDispatchRequestSerializer,
        responses={200: s.RerunPlanPreviewResponseSerializer},
    )
    def post(self, request: Request, site_id) -> Response:
        site = self.site(request, site_id)
        data = validated(s.RerunPlanDispatchRequestSerializer, request)
        outcome = rerun_plan_preview(site=site, device_ids=data["device_ids"], mode=data["mode"])
        body = _skips_and_exclusions(outcome) | {
            "planned_jobs": [
                {
                    "workflow_name": job.workflow_name,
                    "topology": _topology(outcome, job.topology_id),
                    "device_ids": list(job.device_ids),
                    "requirements": [
                        {
                            "name": r.name,
                            "test": r.test,
                            "parameters": dict(r.parameters),
                            "parameter_profile": r.profile_name,
                        }
                        for r in job.requirements
                    ],
                }
                for job in outcome.plan.jobs
            ]
        }
        return Response(s.RerunPlanPreviewResponseSerializer(body).data)


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
        responses={200: s.RerunPlanDispatchResponseSerializer},
    )
    def post(self, request: Request, site_id) -> Response:
        site = self.site(request, site_id)
        data = validated(s.RerunPlanDispatchRequestSerializer, request)
        outcome = rerun_dispatch(
            site=site, device_ids=data["device_ids"], mode=data["mode"], requested_by=actor_label(request.user)
        )
        body = _skips_and_exclusions(outcome) | {
            "created_jobs": [
                {
                    "job_id": job.id,
                    "workflow_name": job.workflow_name,
                    "topology": _topology(outcome, job.topology_id),
                    "device_ids": list(planned.device_ids),
                }
                for planned, job in zip(outcome.plan.jobs, outcome.jobs, strict=True)
            ]
        }
        return Response(s.RerunPlanDispatchResponseSerializer(body).data)
