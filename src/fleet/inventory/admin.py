from django.contrib import admin

from fleet.inventory.models import Device, Satellite, SatelliteCredential, Site, Topology, TopologyMembership


@admin.register(Site)
class SiteAdmin(admin.ModelAdmin):
    list_display = ["slug", "name", "created_at"]
    search_fields = ["slug", "name"]


@admin.register(Satellite)
class SatelliteAdmin(admin.ModelAdmin):
    list_display = ["name", "site", "agent_version", "last_seen_at"]
    list_filter = ["site"]
    search_fields = ["name", "site__slug"]
    # Written by the agent's heartbeat, not by people.
    readonly_fields = ["advertised_workflows", "agent_version", "last_seen_at"]


@admin.register(SatelliteCredential)
class SatelliteCredentialAdmin(admin.ModelAdmin):
    list_display = ["satellite", "application", "created_at"]
    readonly_fields = ["satellite", "application", "created_at"]
    search_fields = ["satellite__name", "application__client_id"]

    def has_add_permission(self, request):
        return False  # issued by `fleet satellite-credentials`, which shows the secret once

    def has_change_permission(self, request, obj=None):
        return False


class MembershipInline(admin.TabularInline):
    model = TopologyMembership
    extra = 0
    fields = ["topology", "unit"]
    autocomplete_fields = ["topology"]


@admin.register(Topology)
class TopologyAdmin(admin.ModelAdmin):
    list_display = ["label", "unit", "site", "satellite"]
    list_filter = ["unit", "site", "satellite"]
    search_fields = ["label"]


@admin.register(Device)
class DeviceAdmin(admin.ModelAdmin):
    list_display = ["hostname", "site", "satellite", "resource_class", "state", "enrolled_at"]
    list_filter = ["site", "state", "resource_class", "satellite"]
    search_fields = ["hostname", "serial", "id"]
    list_select_related = ["site", "satellite"]
    inlines = [MembershipInline]
