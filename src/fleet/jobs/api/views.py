"""Jobs for operators (list, detail, cancel) and the lease protocol for satellites."""

from __future__ import annotations

from uuid import UUID

from django.db.models import Prefetch, QuerySet
from drf_spectacular.utils import extend_schema, extend_schema_view
from rest_framework.decorators import action
from rest_framework.request import Request
from rest_framework.response import Response

from fleet.core.requests import validated
from fleet.core.schema import LIST_ERRORS, RETRIEVE_ERRORS, error_responses
from fleet.inventory.identity import actor_label
from fleet.inventory.scoping import SiteScopedReadViewSet
from fleet.inventory.selectors import satellite_acting
from fleet.jobs import services
from fleet.jobs.api import serializers as s
from fleet.jobs.api.filters import JobFilter
from fleet.jobs.models import Job, JobDevice
from fleet_rules.vocabulary import JobStatus

TAGS = ["Jobs"]
JOB_ACTION_ERRORS = error_responses(400, 401, 403, 404, 409)


@extend_schema_view(
    list=extend_schema(tags=TAGS, responses={200: s.JobSerializer, **error_responses(*LIST_ERRORS)}),
    retrieve=extend_schema(tags=TAGS, responses={200: s.JobSerializer, **error_responses(*RETRIEVE_ERRORS)}),
)
class JobViewSet(SiteScopedReadViewSet):
    queryset = Job.objects.select_related("topology").prefetch_related(
        Prefetch("job_devices", queryset=JobDevice.objects.select_related("device").order_by("device__hostname"))
    )
    serializer_class = s.JobSerializer
    filterset_class = JobFilter
    required_scopes = {"GET": ["fleet:read"], "POST": ["job:run"]}
    required_permissions = {"GET": ["jobs.view_job"], "POST": ["jobs.change_job"]}

    def _reloaded(self, jobs: list[Job]) -> QuerySet[Job]:
        return self.get_queryset().filter(id__in=[j.id for j in jobs]).order_by("created_at", "id")

    @extend_schema(
        operation_id="api_v1_jobs_claim_create",
        tags=TAGS,
        summary="Claim queued jobs (satellite agents)",
        request=s.JobClaimRequestSerializer,
        responses={200: s.JobClaimResponseSerializer, **error_responses(400, 401, 403)},
    )
    @action(detail=False, methods=["post"], url_path="claim")
    def claim(self, request: Request) -> Response:
        data = validated(s.JobClaimRequestSerializer, request)
        satellite = satellite_acting(
            site_slug=data["site_slug"], satellite_name=data["satellite_name"], actor=request.user
        )
        claimed = services.jobs_claim(satellite=satellite, capacity=data["capacity"])
        return Response(s.JobClaimResponseSerializer({"jobs": self._reloaded(claimed)}).data)

    @extend_schema(
        operation_id="api_v1_jobs_heartbeat_create",
        tags=TAGS,
        summary="Extend a running job's lease",
        request=None,
        responses={200: s.JobSerializer, **JOB_ACTION_ERRORS},
        description=(
            "409 when the job is no longer running (finished, cancelled, or its lease already expired, which "
            "fails it): stop working on it."
        ),
    )
    @action(detail=True, methods=["post"], url_path="heartbeat")
    def heartbeat(self, request: Request, pk: UUID) -> Response:
        job = services.job_heartbeat(job_id=pk, actor=request.user)
        return Response(s.JobSerializer(self._reloaded([job]).get()).data)

    @extend_schema(
        operation_id="api_v1_jobs_finish_create",
        tags=TAGS,
        summary="Finish a job and release its devices",
        request=s.JobFinishRequestSerializer,
        responses={200: s.JobSerializer, **JOB_ACTION_ERRORS},
    )
    @action(detail=True, methods=["post"], url_path="finish")
    def finish(self, request: Request, pk: UUID) -> Response:
        data = validated(s.JobFinishRequestSerializer, request)
        job = services.job_finish(
            job_id=pk,
            outcome=JobStatus(data["status"]),
            reason=data["reason"],
            actor=request.user,
        )
        return Response(s.JobSerializer(self._reloaded([job]).get()).data)

    @extend_schema(
        operation_id="api_v1_jobs_cancel_create",
        tags=TAGS,
        summary="Cancel a job (operators)",
        request=None,
        responses={200: s.JobSerializer, **JOB_ACTION_ERRORS},
    )
    @action(detail=True, methods=["post"], url_path="cancel", required_scopes=["job:create"])
    def cancel(self, request: Request, pk: UUID) -> Response:
        job = services.job_cancel(job_id=pk, requested_by=actor_label(request.user))
        return Response(s.JobSerializer(self._reloaded([job]).get()).data)
