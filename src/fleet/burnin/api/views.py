"""Burn-in endpoints: thin adapters (validate → one service → render)."""

from __future__ import annotations

from uuid import UUID

from django.conf import settings
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema, extend_schema_view
from rest_framework import generics, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from fleet.burnin.api import serializers as s
from fleet.burnin.api.filters import PolicyProgressFilter
from fleet.burnin.api.plain_results import plainly_valid_results
from fleet.burnin.evaluation_results.service import evaluation_results_upsert
from fleet.burnin.executions import ExecutionReport, execution_report
from fleet.burnin.models import PolicyProgress
from fleet.burnin.pending_evaluation_feed import pending_evaluations_page
from fleet.burnin.reconcile.load import reconcile_scope_load
from fleet.burnin.reconcile.service import progress_reconcile_page
from fleet.burnin.selectors import execution_get, gpu_vendors, progress_summary, satellite_resource_classes, site_get
from fleet.core.heap import CollectorPausedView
from fleet.core.pagination import FleetCursorPagination
from fleet.core.requests import validated
from fleet.core.schema import error_responses
from fleet.inventory.identity import actor_label
from fleet.inventory.scoping import SiteScopedQuerysetMixin
from fleet.inventory.selectors import satellite_acting
from fleet_rules.evaluations import ResultItem

TAGS = ["Burn-in"]


class EvaluationResultsUpsertView(CollectorPausedView, APIView):
    required_scopes = ["test-execution:evaluate"]
    required_permissions = ["burnin.add_evaluationresult", "burnin.change_evaluationresult"]

    @extend_schema(
        operation_id="api_v1_burn_in_evaluations_results_create",
        tags=TAGS,
        summary="Upsert burn-in evaluation results (internal)",
        description="Idempotently bulk-upsert materialised burn-in evaluation results.",
        request=s.BurnInEvaluationResultsRequestSerializer,
        responses={200: s.BurnInEvaluationResultsResponseSerializer, **error_responses(400, 401, 403)},
    )
    def post(self, request: Request) -> Response:
        results = plainly_valid_results(request.data, limit=int(settings.FLEET["EVALUATION_RESULTS_MAX_ITEMS"]))
        if results is None:  # the serializer judges anything not plainly valid, and words the errors
            results = validated(s.BurnInEvaluationResultsRequestSerializer, request)["results"]
        items = [
            ResultItem(
                execution_id=row["execution_id"],
                payload=row["evaluation_result"],
                source_key=row["evaluation_source_key"],
                expected_updated_at=row["expected_updated_at"],
            )
            for row in results
        ]
        counts = evaluation_results_upsert(items=items, actor=request.user)
        return Response(s.BurnInEvaluationResultsResponseSerializer(counts).data)


EXECUTION_ID = OpenApiParameter(
    "execution_id", OpenApiTypes.UUID, OpenApiParameter.PATH, description="Agent-chosen uuid."
)


class TestExecutionView(APIView):
    required_scopes = {"PUT": ["test-execution:report"], "GET": ["fleet:read"]}
    required_permissions = {
        "PUT": ["burnin.add_testexecution", "burnin.change_testexecution"],
        "GET": ["burnin.view_testexecution"],
    }

    @extend_schema(
        operation_id="api_v1_burn_in_executions_update",
        tags=TAGS,
        summary="Report a test execution (idempotent)",
        description=(
            "Create or update the execution with this agent-chosen id. `updated_at` changes on every real "
            "change and not on an identical replay. A finished execution cannot go back to running."
        ),
        parameters=[EXECUTION_ID],
        request=s.TestExecutionReportSerializer,
        responses={
            200: OpenApiResponse(s.TestExecutionSerializer, description="Updated, or unchanged by a replay."),
            201: OpenApiResponse(s.TestExecutionSerializer, description="Created."),
            **error_responses(400, 401, 403, 404),
        },
    )
    def put(self, request: Request, execution_id: UUID) -> Response:
        data = validated(s.TestExecutionReportSerializer, request)
        outcome = execution_report(
            execution_id=execution_id,
            report=ExecutionReport(**{k: data.get(k) for k in ExecutionReport.__dataclass_fields__}),
            actor=request.user,
            reported_by=actor_label(request.user),
        )
        return Response(
            s.TestExecutionSerializer(outcome.execution).data,
            status=status.HTTP_201_CREATED if outcome.created else status.HTTP_200_OK,
        )

    @extend_schema(
        operation_id="api_v1_burn_in_executions_retrieve",
        tags=TAGS,
        summary="Read a test execution",
        parameters=[OpenApiParameter("execution_id", OpenApiTypes.UUID, OpenApiParameter.PATH)],
        responses={200: s.TestExecutionSerializer, **error_responses(401, 403, 404)},
    )
    def get(self, request: Request, execution_id: UUID) -> Response:
        return Response(s.TestExecutionSerializer(execution_get(execution_id=execution_id, actor=request.user)).data)


class PendingEvaluationsView(CollectorPausedView, APIView):
    required_scopes = ["test-execution:evaluate"]
    required_permissions = ["burnin.view_testexecution"]

    @extend_schema(
        operation_id="api_v1_burn_in_evaluations_pending_list",
        tags=TAGS,
        summary="Executions waiting for a current evaluation",
        description=(
            "Finished executions of the satellite's devices and topologies with no evaluation for their "
            "current `updated_at` and current threshold resolution, oldest change first, keyset-paginated."
        ),
        parameters=[s.PendingEvaluationsQuerySerializer],
        responses={200: s.PendingEvaluationsPageSerializer, **error_responses(400, 401, 403)},
    )
    def get(self, request: Request) -> Response:
        query = validated(s.PendingEvaluationsQuerySerializer, request, data=request.query_params)
        satellite = satellite_acting(
            site_slug=query["site_slug"], satellite_name=query["satellite_name"], actor=request.user
        )
        page = pending_evaluations_page(satellite=satellite, limit=query["limit"], cursor=query.get("cursor"))
        return Response(s.PendingEvaluationsPageSerializer(page).data)


class PolicyProgressReconcileView(CollectorPausedView, APIView):
    required_scopes = ["burn-in-policy-progress:write"]
    required_permissions = ["burnin.add_policyprogress", "burnin.change_policyprogress", "burnin.delete_policyprogress"]

    @extend_schema(
        operation_id="api_v1_burn_in_policy_progress_reconcile_create",
        tags=TAGS,
        summary="Reconcile burn-in policy progress (internal)",
        description=(
            "Reconcile one cursor-paged batch of burn-in policy-progress projection rows for a "
            "site/resource-class scope. A null next_cursor marks the final page, which also runs guarded "
            "cleanup of obsolete rows."
        ),
        request=s.BurnInPolicyProgressReconcileRequestSerializer,
        responses={200: s.BurnInPolicyProgressReconcileResponseSerializer, **error_responses(400, 401, 403)},
    )
    def post(self, request: Request) -> Response:
        data = validated(s.BurnInPolicyProgressReconcileRequestSerializer, request)
        scope = reconcile_scope_load(
            site_slug=data["site_slug"],
            satellite_name=data["satellite_name"],
            resource_class=data["resource_class"],
            gate=data.get("gate"),
            actor=request.user,
        )
        page = progress_reconcile_page(scope=scope, limit=data["limit"], cursor=data.get("cursor"))
        return Response(s.BurnInPolicyProgressReconcileResponseSerializer(page).data)


class ProgressPagination(FleetCursorPagination):
    ordering = ("id",)


@extend_schema_view(
    get=extend_schema(
        operation_id="api_v1_burn_in_policy_progress_list",
        tags=TAGS,
        summary="The policy-progress projection, filtered",
        responses={200: s.PolicyProgressSerializer, **error_responses(400, 401, 403)},
    )
)
class PolicyProgressListView(SiteScopedQuerysetMixin, generics.ListAPIView):
    queryset = PolicyProgress.objects.select_related("requirement", "device", "topology")
    serializer_class = s.PolicyProgressSerializer
    filterset_class = PolicyProgressFilter
    pagination_class = ProgressPagination
    required_scopes = ["fleet:read"]
    required_permissions = ["burnin.view_policyprogress"]


class ProgressSummaryView(APIView):
    required_scopes = ["fleet:read"]
    required_permissions = ["burnin.view_policyprogress"]

    @extend_schema(
        operation_id="api_v1_burn_in_sites_progress_summary_retrieve",
        tags=TAGS,
        summary="Verdict counts per resource class and requirement at a site",
        responses={200: s.ProgressSummarySerializer, **error_responses(401, 403, 404)},
    )
    def get(self, request: Request, site_id: UUID) -> Response:
        site = site_get(site_id=site_id, actor=request.user)
        return Response(s.ProgressSummarySerializer(progress_summary(site=site)).data)


class SatelliteResourceClassesView(APIView):
    """The reconcile scopes of a satellite: the resource classes of the devices it manages, of the
    devices in topologies it manages, and of projection rows it still has (so a scope whose last
    device left is still swept, and its rows cleaned up)."""

    required_scopes = ["fleet:read"]
    required_permissions = ["inventory.view_satellite", "inventory.view_device"]

    @extend_schema(
        operation_id="api_v1_satellites_resource_classes_retrieve",
        tags=["Satellites"],
        summary="Resource classes a satellite manages",
        parameters=[s.SatelliteScopeQuerySerializer],
        responses={200: s.ResourceClassesSerializer, **error_responses(400, 401, 403)},
    )
    def get(self, request: Request) -> Response:
        query = validated(s.SatelliteScopeQuerySerializer, request, data=request.query_params)
        satellite = satellite_acting(
            site_slug=query["site_slug"], satellite_name=query["satellite_name"], actor=request.user
        )
        classes = satellite_resource_classes(satellite)
        body = {"resource_classes": classes, "gpu_vendors": gpu_vendors(classes)}
        return Response(s.ResourceClassesSerializer(body).data)
