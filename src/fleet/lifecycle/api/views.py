"""The lifecycle's read endpoints (the writes that need certificates and dispatch live in
`fleet.burnin.api.lifecycle_views`)."""

from __future__ import annotations

from typing import Any
from uuid import UUID

from django.db.models import QuerySet
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework.generics import ListAPIView
from rest_framework.request import Request
from rest_framework.response import Response

from fleet.core.pagination import FleetCursorPagination
from fleet.core.schema import error_responses
from fleet.lifecycle.api.serializers import DeviceStateChangeSerializer
from fleet.lifecycle.models import DeviceStateChange
from fleet.lifecycle.selectors import device_for_lifecycle, device_history

TAGS = ["Lifecycle"]
DEVICE_ID = OpenApiParameter("device_id", OpenApiTypes.UUID, OpenApiParameter.PATH)


class HistoryPagination(FleetCursorPagination):
    ordering = ("-at", "-id")


class DeviceHistoryView(ListAPIView):
    serializer_class = DeviceStateChangeSerializer
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
        responses={200: DeviceStateChangeSerializer(many=True), **error_responses(400, 401, 403, 404)},
    )
    def get(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        return super().get(request, *args, **kwargs)
