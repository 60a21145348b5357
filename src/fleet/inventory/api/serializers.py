from rest_framework import serializers

from fleet.core.fields import StrictCharField, StrictRegexField
from fleet.inventory.identity import PrincipalKind
from fleet.inventory.models import Device, Satellite, Site, Topology


class SiteSerializer(serializers.ModelSerializer):
    class Meta:
        model = Site
        fields = ["id", "slug", "name", "created_at", "updated_at"]


class AdvertisedWorkflowSerializer(serializers.Serializer):
    name = StrictCharField(max_length=100)
    version = StrictCharField(max_length=100, allow_blank=True, required=False, default="")


class SatelliteSerializer(serializers.ModelSerializer):
    site_slug = serializers.CharField(source="site.slug", read_only=True)
    advertised_workflows = AdvertisedWorkflowSerializer(many=True, read_only=True)

    class Meta:
        model = Satellite
        fields = ["id", "site", "site_slug", "name", "advertised_workflows", "agent_version", "last_seen_at"]


class TopologySerializer(serializers.ModelSerializer):
    satellite_name = serializers.CharField(source="satellite.name", read_only=True)

    class Meta:
        model = Topology
        fields = ["id", "site", "unit", "label", "satellite", "satellite_name"]


class DeviceTopologySerializer(serializers.Serializer):
    id = serializers.UUIDField(source="topology_id")
    unit = serializers.CharField()
    label = serializers.CharField(source="topology.label")  # type: ignore[assignment]  # shadows Field.label, the caption


class DeviceSerializer(serializers.ModelSerializer):
    site_slug = serializers.CharField(source="site.slug", read_only=True)
    satellite_name = serializers.CharField(source="satellite.name", read_only=True)
    enrolled = serializers.BooleanField(source="is_enrolled", read_only=True)
    topologies = DeviceTopologySerializer(source="memberships", many=True, read_only=True)

    class Meta:
        model = Device
        fields = [
            "id",
            "site",
            "site_slug",
            "satellite",
            "satellite_name",
            "hostname",
            "serial",
            "resource_class",
            "state",
            "enrolled_at",
            "enrolled",
            "topologies",
            "created_at",
            "updated_at",
        ]


class SatelliteHeartbeatRequestSerializer(serializers.Serializer):
    """Typed like every JSON body: `"agent_version": 123` is a 400, not the string "123"."""

    site_slug = StrictRegexField(r"^[-a-zA-Z0-9_]+$", max_length=100)
    satellite_name = StrictCharField(max_length=100)
    workflows = AdvertisedWorkflowSerializer(many=True, max_length=50)  # type: ignore[call-arg]  # ListSerializer takes it
    agent_version = StrictCharField(max_length=100, required=False, allow_blank=True, default="")


class WhoAmIResponseSerializer(serializers.Serializer):
    principal = serializers.CharField(help_text="`client:<name>` for OAuth2 clients, `user:<name>` for people.")
    kind = serializers.ChoiceField(choices=PrincipalKind.choices)
    scopes = serializers.ListField(child=serializers.CharField(), help_text="Token scopes (bearer only).")
    site_slug = serializers.CharField(allow_null=True, help_text="The only site this caller may act on.")
    satellite_name = serializers.CharField(allow_null=True)
