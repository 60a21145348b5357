"""Diagnosis endpoints: thin adapters (validate → one read or service → render)."""

from __future__ import annotations

from uuid import UUID

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from fleet.burnin.api import diagnosis_serializers as s
from fleet.burnin.diagnosis import attempts, isolation
from fleet.burnin.diagnosis.outliers import site_outliers_page
from fleet.burnin.selectors import site_get
from fleet.core.requests import validated
from fleet.core.schema import error_responses
from fleet.inventory.identity import actor_label

TAGS = ["Diagnosis"]
SITE_ID = OpenApiParameter("site_id", OpenApiTypes.UUID, OpenApiParameter.PATH, description="Site identifier.")


class SiteOutliersView(APIView):
    required_scopes = ["fleet:read"]
    required_permissions = ["burnin.view_policyprogress"]

    @extend_schema(
        operation_id="api_v1_burn_in_sites_outliers_list",
        tags=TAGS,
        summary="Devices that pass but are far worse than their siblings",
        description=(
            "Per (resource class, requirement, metric, statistic) at the site, over each device's latest passing "
            "evidence: the median and MAD, and the devices whose robust z-score 0.6745·(x − median)/MAD is beyond "
            "the requirement's `outlier_k` (default 3.5) on the side its comparator calls bad. Farthest out first. "
            "`groups` lists every group looked at and why one names none (too few devices, MAD 0, …)."
        ),
        parameters=[SITE_ID, s.OutliersQuerySerializer],
        responses={200: s.OutliersPageSerializer, **error_responses(400, 401, 403, 404)},
    )
    def get(self, request: Request, site_id: UUID) -> Response:
        site = site_get(site_id=site_id, actor=request.user)
        query = validated(s.OutliersQuerySerializer, request, data=request.query_params)
        page = site_outliers_page(
            site=site,
            resource_class=query.get("resource_class"),
            requirement=query.get("requirement"),
            limit=query["limit"],
            cursor=query.get("cursor"),
        )
        return Response(s.OutliersPageSerializer(page).data)


PLAN_ID = OpenApiParameter("plan_id", OpenApiTypes.UUID, OpenApiParameter.PATH, description="Isolation plan id.")
ISOLATION_ERRORS = error_responses(
    400,
    401,
    403,
    404,
    409,
    bad_request="Not a failed cohort, or an unknown topology or requirement.",
    not_found="Unknown site_id.",
)


class _IsolationView(APIView):
    required_scopes = ["job:create"]
    required_permissions = ["jobs.add_job"]


class IsolationPlanPreviewView(_IsolationView):
    @extend_schema(
        operation_id="api_v1_burn_in_sites_isolation_plans_create",
        tags=TAGS,
        summary="Preview culprit isolation of a failed rack cohort",
        description="The cohort, the bound on rounds and the first round's diagnostic collectives; nothing created.",
        parameters=[SITE_ID],
        request=s.IsolationPlanRequestSerializer,
        responses={200: s.IsolationPreviewSerializer, **error_responses(400, 401, 403, 404)},
    )
    def post(self, request: Request, site_id: UUID) -> Response:
        site = site_get(site_id=site_id, actor=request.user)
        data = validated(s.IsolationPlanRequestSerializer, request)
        preview = isolation.isolation_preview(
            site=site, topology_id=data["topology_id"], requirement_name=data["requirement"]
        )
        return Response(s.IsolationPreviewSerializer(isolation.preview_data(preview)).data)


class IsolationPlanDispatchView(_IsolationView):
    @extend_schema(
        operation_id="api_v1_burn_in_sites_isolation_plans_dispatch",
        tags=TAGS,
        summary="Start culprit isolation of a failed rack cohort",
        description=(
            "Creates the plan and dispatches its first round through the standard Job path "
            "(MultiNodeBurnInCollectiveWorkflow over each subset; one active job per device). Diagnostic "
            "executions never decide the topology's projection verdict. 409 when a plan of this cohort is "
            "running or a device is held by another active job."
        ),
        parameters=[SITE_ID],
        request=s.IsolationPlanRequestSerializer,
        responses={200: s.IsolationPlanSerializer, **ISOLATION_ERRORS},
    )
    def post(self, request: Request, site_id: UUID) -> Response:
        site = site_get(site_id=site_id, actor=request.user)
        data = validated(s.IsolationPlanRequestSerializer, request)
        plan = isolation.isolation_dispatch(
            site=site,
            topology_id=data["topology_id"],
            requirement_name=data["requirement"],
            requested_by=actor_label(request.user),
        )
        return Response(s.IsolationPlanSerializer(isolation.plan_data(plan)).data)


class IsolationPlanView(APIView):
    required_scopes = ["fleet:read"]
    required_permissions = ["burnin.view_policyprogress"]

    @extend_schema(
        operation_id="api_v1_burn_in_sites_isolation_plans_retrieve",
        tags=TAGS,
        summary="A culprit isolation plan: its rounds, suspects and culprits",
        parameters=[SITE_ID, PLAN_ID],
        responses={200: s.IsolationPlanSerializer, **error_responses(401, 403, 404)},
    )
    def get(self, request: Request, site_id: UUID, plan_id: UUID) -> Response:
        site = site_get(site_id=site_id, actor=request.user)
        plan = isolation.isolation_plan_get(site=site, plan_id=plan_id)
        return Response(s.IsolationPlanSerializer(isolation.plan_data(plan)).data)


class IsolationPlanAdvanceView(_IsolationView):
    @extend_schema(
        operation_id="api_v1_burn_in_sites_isolation_plans_advance",
        tags=TAGS,
        summary="Move a culprit isolation plan on",
        description=(
            "Idempotent: when every job of the current round has ended and its execution is evaluated, records "
            "the outcomes and dispatches the next round or finishes the plan (naming its culprits as diagnoses); "
            "otherwise returns the plan as it is."
        ),
        request=None,
        parameters=[SITE_ID, PLAN_ID],
        responses={200: s.IsolationPlanSerializer, **error_responses(401, 403, 404, 409)},
    )
    def post(self, request: Request, site_id: UUID, plan_id: UUID) -> Response:
        site = site_get(site_id=site_id, actor=request.user)
        plan = isolation.isolation_advance(site=site, plan_id=plan_id, requested_by=actor_label(request.user))
        return Response(s.IsolationPlanSerializer(isolation.plan_data(plan)).data)


class SiteDiagnosesView(APIView):
    required_scopes = ["fleet:read"]
    required_permissions = ["burnin.view_policyprogress"]

    @extend_schema(
        operation_id="api_v1_burn_in_sites_diagnoses_list",
        tags=TAGS,
        summary="What diagnoses found about devices at a site (newest first)",
        parameters=[SITE_ID, s.DiagnosesQuerySerializer],
        responses={200: s.DiagnosesSerializer, **error_responses(400, 401, 403, 404)},
    )
    def get(self, request: Request, site_id: UUID) -> Response:
        site = site_get(site_id=site_id, actor=request.user)
        query = validated(s.DiagnosesQuerySerializer, request, data=request.query_params)
        rows = isolation.site_diagnoses(site=site, device_id=query.get("device"), limit=query["limit"])
        return Response(s.DiagnosesSerializer({"results": rows}).data)


class TargetAttemptsView(APIView):
    required_scopes = ["fleet:read"]
    required_permissions = ["burnin.view_testexecution"]

    @extend_schema(
        operation_id="api_v1_burn_in_sites_attempts_retrieve",
        tags=TAGS,
        summary="A target's attempts under the current policy version",
        description=(
            "Every execution of the target for the requirement since its policy's version last rose (diagnostic "
            "runs left out), oldest first, with its verdict; and what they say together: passed after N attempts, "
            "passes in a row, flaky."
        ),
        parameters=[SITE_ID, s.AttemptsQuerySerializer],
        responses={200: s.TargetAttemptsSerializer, **error_responses(400, 401, 403, 404)},
    )
    def get(self, request: Request, site_id: UUID) -> Response:
        site = site_get(site_id=site_id, actor=request.user)
        query = validated(s.AttemptsQuerySerializer, request, data=request.query_params)
        found = attempts.target_attempts(site=site, requirement_name=query["requirement"], target_id=query["target"])
        return Response(s.TargetAttemptsSerializer(found).data)
