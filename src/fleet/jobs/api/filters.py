import django_filters

from fleet.jobs.models import Job
from fleet_rules.vocabulary import JobStatus, WorkflowName


class JobFilter(django_filters.FilterSet):
    site = django_filters.UUIDFilter(field_name="site_id")
    site_slug = django_filters.CharFilter(field_name="site__slug")
    satellite = django_filters.UUIDFilter(field_name="satellite_id")
    status = django_filters.MultipleChoiceFilter(choices=JobStatus.choices)
    workflow = django_filters.ChoiceFilter(field_name="workflow_name", choices=WorkflowName.choices)
    device = django_filters.UUIDFilter(field_name="job_devices__device_id")

    class Meta:
        model = Job
        fields = ["site", "site_slug", "satellite", "status", "workflow", "device"]
