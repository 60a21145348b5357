"""Jobs for operators (list, detail, cancel) and the lease protocol for satellites."""

from __future__ import annotations

from django.db.models import Prefetch
from drf_spectacular.utils import extend_schema, extend_schema_view
from rest_framework.decorators import action
from rest_framework.request import Request
from rest_framework.response import Response

from fleet.core.error_schema import ERROR_DESCRIPTIONS
from fleet.core.errors import Conflict
from fleet.core.principals import ClientPrincipal, actor_label, ensure_acts_as_satellite
from fleet.core.requests import validated
from fleet.core.views import SiteScopedReadViewSet
from fleet.inventory.selectors import satellite_of_site
from fleet.jobs import services
from fleet.jobs.api import serializers as s
from fleet.jobs.api.filters import JobFilter
from fleet.jobs.models import Job, JobDevice, JobStatus

WITH_CONFLICT = {**{k: ERROR_DESCRIPTIONS[k] for k in (400, 401, 403, 404)}, 409: ERROR_DESCRIPTIONS[409]}


def _caller_satellite_id(request: Request):
    user = request.user
    return user.satellite.id if isinstance(user, ClientPrincipal) and user.satellite is not None else None


@extend_schema_view(list=extend_schema(tags=["Jobs"]), retrieve=extend_schema(tags=["Jobs"]))
class JobViewSet(SiteScopedReadViewSet):
    queryset = Job.objects.select_related("topology").prefetch_related(
        Prefetch("job_devices", queryset=JobDevice.objects.select_related("device").order_by("device__hostname"))
    )
    serializer_class = s.JobSerializer
    filterset_class = JobFilter
    required_scopes = {"GET": ["fleet:read"], "POST": ["job:run"]}
    required_permissions = {"GET": ["jobs.view_job"], "POST": ["jobs.change_job"]}

    def _reload(self, job: Job) -> Job:
        return self.get_queryset().get(id=job.id)

    @extend_schema(
        operation_id="api_v1_jobs_claim_create",
        tags=["Jobs"],
        summary="Claim queued jobs (satellite agents)",
        request=s.JobClaimRequestSerializer,
        responses={200: s.JobClaimResponseSerializer},
    )
    @action(detail=False, methods=["post"], url_path="claim")
    def claim(self, request: Request) -> Response:
        data = validated(s.JobClaimRequestSerializer, request)
        satellite = satellite_of_site(site_slug=data["site_slug"], satellite_name=data["satellite_name"])
        ensure_acts_as_satellite(request.user, satellite)
        claimed = services.jobs_claim(satellite=satellite, capacity=data["capacity"])
        jobs = self.get_queryset().filter(id__in=[j.id for j in claimed]).order_by("created_at", "id")
        return Response(s.JobClaimResponseSerializer({"jobs": jobs}).data)

    @extend_schema(
        operation_id="api_v1_jobs_heartbeat_create",
        tags=["Jobs"],
        summary="Extend a running job's lease",
        request=None,
        responses={200: s.JobSerializer},
        description=(
            "409 when the job is no longer running (finished, cancelled, or its lease already expired, which "
            "fails it): stop working on it."
        ),
    )
    @action(detail=True, methods=["post"], url_path="heartbeat")
    def heartbeat(self, request: Request, pk=None) -> Response:
        job = services.job_heartbeat(job_id=pk, satellite_id=_caller_satellite_id(request))
        if job.status != JobStatus.RUNNING:
            raise Conflict(f"Job {job.id} is {job.status} ({job.failure_reason or 'no reason'}); stop working on it.")
        return Response(s.JobSerializer(self._reload(job)).data)

    @extend_schema(
        operation_id="api_v1_jobs_finish_create",
        tags=["Jobs"],
        summary="Finish a job and release its devices",
        request=s.JobFinishRequestSerializer,
        responses={200: s.JobSerializer},
    )
    @action(detail=True, methods=["post"], url_path="finish")
    def finish(self, request: Request, pk=None) -> Response:
        data = validated(s.JobFinishRequestSerializer, request)
        job = services.job_finish(
            job_id=pk, outcome=data["status"], reason=data["reason"], satellite_id=_caller_satellite_id(request)
        )
        return Response(s.JobSerializer(self._reload(job)).data)

    @extend_schema(
        operation_id="api_v1_jobs_cancel_create",
        tags=["Jobs"],
        summary="Cancel a job (operators)",
        request=None,
        responses={200: s.JobSerializer},
    )
    @action(detail=True, methods=["post"], url_path="cancel", required_scopes=["job:create"])
    def cancel(self, request: Request, pk=None) -> Response:
        job = services.job_cancel(job_id=pk, requested_by=actor_label(request.user))
        return Response(s.JobSerializer(self._reload(job)).data)

    heartbeat.error_responses = finish.error_responses = cancel.error_responses = WITH_CONFLICT
