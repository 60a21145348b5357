from django.db.models import Prefetch
from drf_spectacular.utils import extend_schema, extend_schema_view
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from fleet.core.principals import ensure_acts_as_satellite
from fleet.core.requests import validated
from fleet.core.views import SiteScopedReadViewSet
from fleet.inventory.api import filters, serializers
from fleet.inventory.models import Device, Satellite, Site, Topology, TopologyMembership
from fleet.inventory.selectors import satellite_of_site, satellite_resource_classes
from fleet.inventory.services import satellite_heartbeat_record


@extend_schema_view(list=extend_schema(tags=["Inventory"]), retrieve=extend_schema(tags=["Inventory"]))
class SiteViewSet(SiteScopedReadViewSet):
    queryset = Site.objects.all()
    serializer_class = serializers.SiteSerializer
    site_lookup = "id"
    ordering = ("slug",)


@extend_schema_view(list=extend_schema(tags=["Inventory"]), retrieve=extend_schema(tags=["Inventory"]))
class SatelliteViewSet(SiteScopedReadViewSet):
    queryset = Satellite.objects.select_related("site")
    serializer_class = serializers.SatelliteSerializer
    filterset_class = filters.SatelliteFilter


@extend_schema_view(list=extend_schema(tags=["Inventory"]), retrieve=extend_schema(tags=["Inventory"]))
class TopologyViewSet(SiteScopedReadViewSet):
    queryset = Topology.objects.select_related("satellite")
    serializer_class = serializers.TopologySerializer
    filterset_class = filters.TopologyFilter


@extend_schema_view(list=extend_schema(tags=["Inventory"]), retrieve=extend_schema(tags=["Inventory"]))
class DeviceViewSet(SiteScopedReadViewSet):
    queryset = Device.objects.select_related("site", "satellite").prefetch_related(
        Prefetch("memberships", queryset=TopologyMembership.objects.select_related("topology").order_by("unit"))
    )
    serializer_class = serializers.DeviceSerializer
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
        responses={200: serializers.SatelliteSerializer},
    )
    def post(self, request: Request) -> Response:
        data = validated(serializers.SatelliteHeartbeatRequestSerializer, request)
        satellite = satellite_of_site(site_slug=data["site_slug"], satellite_name=data["satellite_name"])
        ensure_acts_as_satellite(request.user, satellite)
        satellite = satellite_heartbeat_record(
            satellite=satellite, workflows=data["workflows"], agent_version=data["agent_version"]
        )
        return Response(serializers.SatelliteSerializer(satellite).data)


class SatelliteResourceClassesView(APIView):
    """The reconcile scopes of a satellite: the resource classes of the devices it manages, of the
    devices in topologies it manages, and of projection rows it still has (so a scope whose last
    device left is still swept, and its rows cleaned up)."""

    required_scopes = ["fleet:read"]

    @extend_schema(
        operation_id="api_v1_satellites_resource_classes_retrieve",
        tags=["Satellites"],
        summary="Resource classes a satellite manages",
        parameters=[serializers.SatelliteScopeQuerySerializer],
        responses={200: serializers.ResourceClassesSerializer},
    )
    def get(self, request: Request) -> Response:
        query = validated(serializers.SatelliteScopeQuerySerializer, request, data=request.query_params)
        satellite = satellite_of_site(site_slug=query["site_slug"], satellite_name=query["satellite_name"])
        ensure_acts_as_satellite(request.user, satellite)
        return Response(
            serializers.ResourceClassesSerializer({"resource_classes": satellite_resource_classes(satellite)}).data
        )
