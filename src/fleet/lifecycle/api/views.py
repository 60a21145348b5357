"""The lifecycle's operations: a device's history, an operator's transition (the acceptance gate:
a move into an accepted state needs a valid certificate or a recorded override), for people and
their clients only (a satellite's client is refused, and another site's); and the node states a
satellite's agent gates its scheduler's nodes by (satellites only, each its own)."""

from __future__ import annotations

from typing import Any
from uuid import UUID

from django.db.models import QuerySet
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework.generics import ListAPIView
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from fleet.core.exceptions import PermissionDeniedError
from fleet.core.pagination import FleetCursorPagination
from fleet.core.permissions import acting_person
from fleet.core.requests import validated
from fleet.core.schema import error_responses
from fleet.inventory.identity import actor_label, ensure_satellite_client
from fleet.inventory.selectors import satellite_acting
from fleet.lifecycle.api import serializers as s
from fleet.lifecycle.models import DeviceStateChange
from fleet.lifecycle.selectors import device_for_lifecycle, device_history, satellite_node_states
from fleet.lifecycle.services import acceptance_gate, device_move
from fleet_rules.lifecycle import needs_certificate
from fleet_rules.vocabulary import DeviceState, Mover

TAGS = ["Lifecycle"]
DEVICE_ID = OpenApiParameter("device_id", OpenApiTypes.UUID, OpenApiParameter.PATH)


class HistoryPagination(FleetCursorPagination):
    ordering = ("-at", "-id")


class DeviceHistoryView(ListAPIView):
    serializer_class = s.DeviceStateChangeSerializer
    pagination_class = HistoryPagination
    required_scopes = ["fleet:read"]
    required_permissions = ["inventory.view_device"]
    filter_backends: list[type] = []

    def get_queryset(self) -> QuerySet[DeviceStateChange]:
        if getattr(self, "swagger_fake_view", False):
            return DeviceStateChange.objects.none()
        device_id: UUID = self.kwargs["device_id"]
        return device_history(device_for_lifecycle(device_id=device_id, actor=self.request.user))

    @extend_schema(
        operation_id="api_v1_devices_history_list",
        tags=TAGS,
        summary="A device's lifecycle history",
        description=(
            "Every change of the device's lifecycle state, newest first: from and to, when, who (a person, a "
            "client, or `system`), why, the cause and the ids it refers to. Automatic moves the circuit "
            "breaker held are listed with `held: true` (the state did not change). Satellites' clients "
            "are refused."
        ),
        parameters=[DEVICE_ID],
        responses={200: s.DeviceStateChangeSerializer(many=True), **error_responses(400, 401, 403, 404)},
    )
    def get(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        return super().get(request, *args, **kwargs)


class DeviceTransitionView(APIView):
    required_scopes = ["job:create"]
    required_permissions = ["inventory.change_device"]

    @extend_schema(
        operation_id="api_v1_devices_transitions_create",
        tags=TAGS,
        summary="Move a device to another lifecycle state",
        description=(
            "Checked by the lifecycle table (docs/lifecycle.md): 409 naming the rule when refused (e.g. "
            "needs_repair → burn_in only by a repair record). Into accepted or in_service the device needs a "
            "valid certificate, or `force` with a `reason` (people need `burnin.add_acceptanceoverride`; "
            "recorded). The change and its history entry are written together."
        ),
        parameters=[DEVICE_ID],
        request=s.TransitionRequestSerializer,
        responses={200: s.TransitionResponseSerializer, **error_responses(400, 401, 403, 404, 409)},
    )
    def post(self, request: Request, device_id: UUID) -> Response:
        data = validated(s.TransitionRequestSerializer, request)
        device = device_for_lifecycle(device_id=device_id, actor=request.user)
        to = DeviceState(data["to"])
        if data["force"] and needs_certificate(device.state, to, Mover.OPERATOR):
            person = acting_person(request)
            permission = acceptance_gate().override_permission
            if person is None or not person.has_perm(permission):
                raise PermissionDeniedError(f"Forcing a move to {to} needs the {permission} permission.")
        moved = device_move(
            device_id=device.id, to=to, actor=actor_label(request.user), reason=data["reason"], force=data["force"]
        )
        return Response(s.TransitionResponseSerializer(moved).data)


class SatelliteNodeStatesView(APIView):
    required_scopes = ["fleet:read"]
    required_permissions = ["inventory.view_device"]

    @extend_schema(
        operation_id="api_v1_satellites_node_states_retrieve",
        tags=["Satellites"],
        summary="Lifecycle states of a satellite's devices, for its node gate",
        description=(
            "The devices the satellite manages, by hostname (keyset-paginated), each with its lifecycle state and, "
            "in needs_repair, why and since when: what the agent's node gate keeps its scheduler's nodes in line "
            "with (docs/agent.md). Satellites' clients only, each for itself: people and operator clients are "
            "refused (they read the device pages and the repair queue)."
        ),
        parameters=[s.NodeStatesQuerySerializer],
        responses={200: s.NodeStatesPageSerializer, **error_responses(400, 401, 403)},
    )
    def get(self, request: Request) -> Response:
        ensure_satellite_client(request.user)
        query = validated(s.NodeStatesQuerySerializer, request, data=request.query_params)
        satellite = satellite_acting(
            site_slug=query["site_slug"], satellite_name=query["satellite_name"], actor=request.user
        )
        page = satellite_node_states(satellite=satellite, limit=query["limit"], cursor=query.get("cursor"))
        return Response(s.NodeStatesPageSerializer(page).data)
