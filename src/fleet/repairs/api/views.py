"""The repairs' operations: a device's repairs and recording one (it dispatches the re-burn-in),
the repair queue and the circuit breakers. People and their clients only: a satellite's client is
refused, and another site's."""

from __future__ import annotations

from uuid import UUID

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from fleet.burnin.reads.device import repair_checks
from fleet.core.exceptions import FleetError, NotFoundError
from fleet.core.requests import validated
from fleet.core.schema import error_responses
from fleet.inventory.identity import actor_label, ensure_not_satellite, ensure_site_allowed
from fleet.inventory.models import Site
from fleet.lifecycle.selectors import device_for_lifecycle, device_repairs
from fleet.repairs.api import serializers as s
from fleet.repairs.reads import repair_queue, site_breakers
from fleet.repairs.services import breaker_reset, repair_record
from fleet_rules.explanations import SKIP_EXPLANATIONS

TAGS = ["Lifecycle"]
DEVICE_ID = OpenApiParameter("device_id", OpenApiTypes.UUID, OpenApiParameter.PATH)
SITE_ID = OpenApiParameter("site_id", OpenApiTypes.UUID, OpenApiParameter.PATH)
RESOURCE_CLASS = OpenApiParameter("resource_class", OpenApiTypes.STR, OpenApiParameter.PATH)
LIMIT = OpenApiParameter("limit", OpenApiTypes.INT, OpenApiParameter.QUERY, description="At most 500 (default 100).")


def _site(request: Request, site_id: UUID) -> Site:
    ensure_not_satellite(request.user)
    site = Site.objects.filter(id=site_id).first()
    if site is None:
        raise NotFoundError(f"No site {site_id}.")
    ensure_site_allowed(request.user, site.id)
    return site


class DeviceRepairsView(APIView):
    required_scopes = {"GET": ["fleet:read"], "POST": ["job:create"]}
    required_permissions = {"GET": ["inventory.view_device"], "POST": ["inventory.change_device", "jobs.add_job"]}

    @extend_schema(
        operation_id="api_v1_devices_repairs_list",
        tags=TAGS,
        summary="A device's repairs",
        parameters=[DEVICE_ID],
        responses={200: s.RepairListSerializer, **error_responses(401, 403, 404)},
    )
    def get(self, request: Request, device_id: UUID) -> Response:
        device = device_for_lifecycle(device_id=device_id, actor=request.user)
        repairs = list(device_repairs(device)[:100])
        checks = repair_checks(device.id, repairs)
        return Response(s.RepairListSerializer({"results": repairs}, context={"hardware_checks": checks}).data)

    @extend_schema(
        operation_id="api_v1_devices_repairs_create",
        tags=TAGS,
        summary="Record a repair and burn the device in again",
        description=(
            "For a device in needs_repair or maintenance (409 otherwise): records what was done and which parts "
            "were swapped, moves the device to burn_in (its failures before the repair stop counting) and "
            "dispatches its re-burn-in through the standard job path — every requirement (`rerun: all`, the "
            "default) or only what failed (`failed`). 201 with the repair, the new state and the created jobs."
        ),
        parameters=[DEVICE_ID],
        request=s.RepairRequestSerializer,
        responses={201: s.RepairResponseSerializer, **error_responses(400, 401, 403, 404, 409)},
    )
    def post(self, request: Request, device_id: UUID) -> Response:
        data = validated(s.RepairRequestSerializer, request)
        device = device_for_lifecycle(device_id=device_id, actor=request.user)
        recorded = repair_record(
            device_id=device.id,
            summary=data["summary"],
            parts=[dict(p) for p in data["parts"]],
            rerun=data["rerun"],
            actor=actor_label(request.user),
        )
        skipped = [
            f"{skip.requirement_name}: {SKIP_EXPLANATIONS[skip.reason]}" for skip in recorded.dispatch.plan.skips
        ]
        body = {"repair": recorded.repair, "device": recorded.device, "skipped": skipped}
        return Response(s.RepairResponseSerializer(body).data, status=status.HTTP_201_CREATED)


class RepairQueueView(APIView):
    required_scopes = ["fleet:read"]
    required_permissions = ["inventory.view_device"]

    @extend_schema(
        operation_id="api_v1_burn_in_sites_repair_queue_retrieve",
        tags=TAGS,
        summary="Devices waiting for repair",
        description=(
            "Devices of the site in needs_repair, oldest first: since when, why (the requirement, its failures "
            "since the last repair and the failing rule of the execution that sent it, the isolation finding, or the "
            "fatal Xid its burn-in logged)."
        ),
        parameters=[SITE_ID, LIMIT],
        responses={200: s.RepairQueueSerializer, **error_responses(400, 401, 403, 404)},
    )
    def get(self, request: Request, site_id: UUID) -> Response:
        site = _site(request, site_id)
        limit = _limit(request)
        queued, more = repair_queue(site, limit=limit)
        return Response(s.RepairQueueSerializer({"results": queued, "more": more}).data)


class BreakersView(APIView):
    required_scopes = ["fleet:read"]
    required_permissions = ["inventory.view_device"]

    @extend_schema(
        operation_id="api_v1_burn_in_sites_breakers_retrieve",
        tags=TAGS,
        summary="The site's circuit breakers",
        description=(
            "Per resource class, a breaker trips when automatic moves to repair would exceed the policy's "
            "`breaker_share` of the class's enrolled devices at the site within `breaker_window`; while open it "
            "holds every further automatic move of that scope (recorded as held_by_breaker)."
        ),
        parameters=[SITE_ID],
        responses={200: s.BreakersSerializer, **error_responses(401, 403, 404)},
    )
    def get(self, request: Request, site_id: UUID) -> Response:
        return Response(s.BreakersSerializer({"results": site_breakers(_site(request, site_id))}).data)


class BreakerResetView(APIView):
    required_scopes = ["job:create"]
    required_permissions = ["inventory.change_device"]

    @extend_schema(
        operation_id="api_v1_burn_in_sites_breakers_reset_create",
        tags=TAGS,
        summary="Close a circuit breaker",
        description=(
            "Closes the open breaker of the resource class (404 when none is open) and judges the moves it held "
            "again: each held device still failing too often goes to repair now."
        ),
        parameters=[SITE_ID, RESOURCE_CLASS],
        request=s.BreakerResetRequestSerializer,
        responses={200: s.BreakerResetResponseSerializer, **error_responses(400, 401, 403, 404)},
    )
    def post(self, request: Request, site_id: UUID, resource_class: str) -> Response:
        data = validated(s.BreakerResetRequestSerializer, request)
        site = _site(request, site_id)
        reset = breaker_reset(
            site=site, resource_class=resource_class, actor=actor_label(request.user), reason=data["reason"]
        )
        body = {
            "breaker": next(b for b in site_breakers(site) if b.id == reset.breaker.id),
            "moved": [m.device_id for m in reset.rejudged.moved],
            "held": [m.device_id for m in reset.rejudged.held],
        }
        return Response(s.BreakerResetResponseSerializer(body).data)


def _limit(request: Request) -> int:
    raw = request.query_params.get("limit", "100")
    if not raw.isdigit() or not 1 <= int(raw) <= 500:
        raise FleetError("limit must be a whole number from 1 to 500.", field_errors={"limit": ["From 1 to 500."]})
    return int(raw)
