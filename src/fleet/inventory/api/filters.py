import django_filters

from fleet.inventory.models import Device, Satellite, Topology
from fleet_rules.vocabulary import DeviceState, TopologyUnit


class SatelliteFilter(django_filters.FilterSet):
    site = django_filters.UUIDFilter(field_name="site_id")
    site_slug = django_filters.CharFilter(field_name="site__slug")

    class Meta:
        model = Satellite
        fields = ["site", "site_slug", "name"]


class TopologyFilter(django_filters.FilterSet):
    site = django_filters.UUIDFilter(field_name="site_id")
    site_slug = django_filters.CharFilter(field_name="site__slug")
    unit = django_filters.ChoiceFilter(choices=TopologyUnit.choices)
    satellite = django_filters.UUIDFilter(field_name="satellite_id")

    class Meta:
        model = Topology
        fields = ["site", "site_slug", "unit", "label", "satellite"]


class DeviceFilter(django_filters.FilterSet):
    site = django_filters.UUIDFilter(field_name="site_id")
    site_slug = django_filters.CharFilter(field_name="site__slug")
    resource_class = django_filters.CharFilter()
    state = django_filters.MultipleChoiceFilter(choices=DeviceState.choices)
    topology = django_filters.UUIDFilter(field_name="memberships__topology_id")
    satellite = django_filters.UUIDFilter(field_name="satellite_id")
    satellite_name = django_filters.CharFilter(field_name="satellite__name")
    hostname = django_filters.CharFilter()

    class Meta:
        model = Device
        fields = ["site", "site_slug", "resource_class", "state", "topology", "satellite", "satellite_name", "hostname"]
