from __future__ import annotations

from django.db.models import Prefetch
from drf_spectacular.utils import extend_schema, extend_schema_view
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from fleet.core.requests import validated
from fleet.core.schema import error_responses, read_only_operations
from fleet.inventory.api import filters, serializers
from fleet.inventory.identity import describe_caller
from fleet.inventory.models import Device, Satellite, Site, Topology, TopologyMembership
from fleet.inventory.scoping import SiteScopedReadViewSet
from fleet.inventory.selectors import satellite_acting
from fleet.inventory.services import satellite_heartbeat_record

TAGS = ["Inventory"]


@extend_schema_view(**read_only_operations(serializers.SiteSerializer, tags=TAGS))
class SiteViewSet(SiteScopedReadViewSet):
    queryset = Site.objects.all()
    serializer_class = serializers.SiteSerializer
    required_permissions = ["inventory.view_site"]
    site_lookup = "id"
    ordering = ("slug",)


@extend_schema_view(**read_only_operations(serializers.SatelliteSerializer, tags=TAGS))
class SatelliteViewSet(SiteScopedReadViewSet):
    queryset = Satellite.objects.select_related("site")
    serializer_class = serializers.SatelliteSerializer
    required_permissions = ["inventory.view_satellite"]
    filterset_class = filters.SatelliteFilter


@extend_schema_view(**read_only_operations(serializers.TopologySerializer, tags=TAGS))
class TopologyViewSet(SiteScopedReadViewSet):
    queryset = Topology.objects.select_related("satellite")
    serializer_class = serializers.TopologySerializer
    required_permissions = ["inventory.view_topology"]
    filterset_class = filters.TopologyFilter


@extend_schema_view(**read_only_operations(serializers.DeviceSerializer, tags=TAGS))
class DeviceViewSet(SiteScopedReadViewSet):
    queryset = Device.objects.select_related("site", "satellite").prefetch_related(
        Prefetch("memberships", queryset=TopologyMembership.objects.select_related("topology").order_by("unit"))
    )
    serializer_class = serializers.DeviceSerializer
    required_permissions = ["inventory.view_device"]
    filterset_class = filters.DeviceFilter


class SatelliteHeartbeatView(APIView):
    """The agent's heartbeat: what it can run (workflows and versions) and that it is alive."""

    required_scopes = ["job:run"]
    required_permissions = ["inventory.change_satellite"]

    @extend_schema(
        operation_id="api_v1_satellites_heartbeat_create",
        tags=["Satellites"],
        summary="Record a satellite heartbeat",
        request=serializers.SatelliteHeartbeatRequestSerializer,
        responses={200: serializers.SatelliteSerializer, **error_responses(400, 401, 403)},
    )
    def post(self, request: Request) -> Response:
        data = validated(serializers.SatelliteHeartbeatRequestSerializer, request)
        satellite = satellite_acting(
            site_slug=data["site_slug"], satellite_name=data["satellite_name"], actor=request.user
        )
        satellite = satellite_heartbeat_record(
            satellite=satellite, workflows=data["workflows"], agent_version=data["agent_version"]
        )
        return Response(serializers.SatelliteSerializer(satellite).data)


# Who am I: lets an operator or an agent check its credentials before doing real work. (No
# docstring: it would become the operation's description.)
class WhoAmIView(APIView):
    required_scopes = ["fleet:read"]
    required_permissions: list[str] = []  # any signed-in person may ask who they are

    @extend_schema(
        operation_id="api_v1_auth_whoami_retrieve",
        tags=["Auth"],
        summary="Describe the caller",
        responses={200: serializers.WhoAmIResponseSerializer, **error_responses(401, 403)},
    )
    def get(self, request: Request) -> Response:
        scopes = sorted(getattr(request.auth, "scopes", None) or []) if hasattr(request.auth, "scope") else []
        return Response(serializers.WhoAmIResponseSerializer(describe_caller(request.user, scopes)).data)
