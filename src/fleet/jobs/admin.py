from django.contrib import admin

from fleet.core.admin import ViewOnlyAdmin
from fleet.jobs.models import Job, JobDevice


class JobDeviceInline(admin.TabularInline):
    model = JobDevice
    fields = ["device", "active"]
    readonly_fields = ["device", "active"]
    extra = 0

    def has_add_permission(self, request, obj=None):
        return False


@admin.register(Job)
class JobAdmin(ViewOnlyAdmin):
    """Jobs are created by the Job path and moved by agents: read-only here (cancel via the API)."""

    list_display = ["id", "workflow_name", "status", "site", "satellite", "topology", "requested_by", "created_at"]
    list_filter = ["status", "workflow_name", "site", "satellite"]
    search_fields = ["id", "requested_by", "job_devices__device__hostname"]
    list_select_related = ["site", "satellite", "topology"]
    inlines = [JobDeviceInline]
