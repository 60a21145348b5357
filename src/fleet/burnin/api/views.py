"""Burn-in endpoints: thin adapters (validate → one service → render)."""

from __future__ import annotations

from django.shortcuts import get_object_or_404
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema, extend_schema_view
from rest_framework import generics, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from fleet.burnin.api import serializers as s
from fleet.burnin.api.filters import PolicyProgressFilter
from fleet.burnin.evaluations import ResultItem, evaluation_results_upsert
from fleet.burnin.executions import ExecutionReport, execution_report
from fleet.burnin.models import PolicyProgress, TestExecution
from fleet.burnin.pending import pending_evaluations_page
from fleet.burnin.reconcile import progress_reconcile_page, reconcile_scope_load
from fleet.burnin.selectors import progress_summary
from fleet.core.error_schema import ERROR_DESCRIPTIONS
from fleet.core.pagination import FleetCursorPagination
from fleet.core.principals import actor_label, ensure_acts_as_satellite, ensure_site_allowed
from fleet.core.requests import validated
from fleet.core.views import SiteScopedQuerysetMixin
from fleet.inventory.models import Site
from fleet.inventory.selectors import satellite_of_site

TAGS = ["Burn-in"]


class EvaluationResultsUpsertView(APIView):
    required_scopes = ["test-execution:evaluate"]
    required_permissions = ["burnin.add_evaluationresult", "burnin.change_evaluationresult"]
    error_responses = {400: ERROR_DESCRIPTIONS[400], 401: ERROR_DESCRIPTIONS[401], 403: ERROR_DESCRIPTIONS[403]}

    @extend_schema(
        operation_id="api_v1_burn_in_evaluations_results_create",
        tags=TAGS,
        summary="Upsert burn-in evaluation results (internal)",
        description="Idempotently bulk-upsert materialised burn-in evaluation results.",
        request=s.BurnInEvaluationResultsRequestSerializer,
        responses={200: s.BurnInEvaluationResultsResponseSerializer},
    )
    def post(self, request: Request) -> Response:
        data = validated(s.BurnInEvaluationResultsRequestSerializer, request)
        items = [
            ResultItem(
                execution_id=row["execution_id"],
                payload=row["evaluation_result"],
                source_key=row["evaluation_source_key"],
                expected_updated_at=row["expected_updated_at"],
            )
            for row in data["results"]
        ]
        counts = evaluation_results_upsert(items=items, actor=request.user)
        return Response(s.BurnInEvaluationResultsResponseSerializer(vars(counts)).data)


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
        parameters=[
            OpenApiParameter("execution_id", OpenApiTypes.UUID, OpenApiParameter.PATH, description="Agent-chosen uuid.")
        ],
        request=s.TestExecutionReportSerializer,
        responses={
            200: OpenApiResponse(s.TestExecutionSerializer, description="Updated, or unchanged by a replay."),
            201: OpenApiResponse(s.TestExecutionSerializer, description="Created."),
        },
    )
    def put(self, request: Request, execution_id) -> Response:
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
        responses={200: s.TestExecutionSerializer},
    )
    def get(self, request: Request, execution_id) -> Response:
        execution = TestExecution.objects.select_related("requirement").filter(id=execution_id).first()
        if execution is None:
            from rest_framework.exceptions import NotFound

            raise NotFound(f"No execution {execution_id}.")
        ensure_site_allowed(request.user, execution.site_id)
        return Response(s.TestExecutionSerializer(execution).data)


class PendingEvaluationsView(APIView):
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
        responses={200: s.PendingEvaluationsPageSerializer},
    )
    def get(self, request: Request) -> Response:
        query = validated(s.PendingEvaluationsQuerySerializer, request, data=request.query_params)
        satellite = satellite_of_site(site_slug=query["site_slug"], satellite_name=query["satellite_name"])
        ensure_acts_as_satellite(request.user, satellite)
        page = pending_evaluations_page(satellite=satellite, limit=query["limit"], cursor=query.get("cursor"))
        body = {
            "results": [
                {
                    "execution_id": item.execution_id,
                    "updated_at": item.updated_at,
                    "status": item.status,
                    "requirement": item.requirement,
                    "test": item.test,
                    "device_id": item.device_id,
                    "topology_id": item.topology_id,
                    "parameters": item.parameters,
                    "metrics": item.metrics,
                    "error": item.error,
                    "thresholds": item.resolution.rules_list,
                    "evaluation_source_key": item.resolution.key,
                }
                for item in page.items
            ],
            "next_cursor": page.next_cursor,
        }
        return Response(s.PendingEvaluationsPageSerializer(body).data)


class PolicyProgressReconcileView(APIView):
    required_scopes = ["burn-in-policy-progress:write"]
    required_permissions = ["burnin.add_policyprogress", "burnin.change_policyprogress", "burnin.delete_policyprogress"]
    error_responses = {400: ERROR_DESCRIPTIONS[400], 401: ERROR_DESCRIPTIONS[401], 403: ERROR_DESCRIPTIONS[403]}

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
        responses={200: s.BurnInPolicyProgressReconcileResponseSerializer},
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
        return Response(s.BurnInPolicyProgressReconcileResponseSerializer(vars(page)).data)


class ProgressPagination(FleetCursorPagination):
    ordering = ("id",)


@extend_schema_view(
    get=extend_schema(
        operation_id="api_v1_burn_in_policy_progress_list",
        tags=TAGS,
        summary="The policy-progress projection, filtered",
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
        responses={200: s.ProgressSummarySerializer},
    )
    def get(self, request: Request, site_id) -> Response:
        site = get_object_or_404(Site, id=site_id)
        ensure_site_allowed(request.user, site.id)
        body = {"site_id": site.id, "site_slug": site.slug, "rows": progress_summary(site_id=site.id)}
        return Response(s.ProgressSummarySerializer(body).data)
