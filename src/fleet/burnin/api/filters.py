import django_filters

from fleet.burnin.models import PolicyProgress
from fleet_rules.vocabulary import Verdict


class PolicyProgressFilter(django_filters.FilterSet):
    site = django_filters.UUIDFilter(field_name="site_id")
    site_slug = django_filters.CharFilter(field_name="site__slug")
    satellite = django_filters.UUIDFilter(field_name="satellite_id")
    resource_class = django_filters.CharFilter()
    requirement = django_filters.CharFilter(field_name="requirement__name")
    gate = django_filters.CharFilter()
    verdict = django_filters.MultipleChoiceFilter(choices=Verdict.choices)
    device = django_filters.UUIDFilter(field_name="device_id")
    topology = django_filters.UUIDFilter(field_name="topology_id")

    class Meta:
        model = PolicyProgress
        fields = [
            "site",
            "site_slug",
            "satellite",
            "resource_class",
            "requirement",
            "gate",
            "verdict",
            "device",
            "topology",
        ]
