"""Policies are declared as code (`fleet apply`), which also moves their versions: the admin shows
them read-only so a click cannot change what judges devices without a version bump."""

from django.contrib import admin

from fleet.policies.models import AcceptancePolicy, ParameterProfile, Requirement, ThresholdRule


class ReadOnly:
    def has_add_permission(self, request, obj=None):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False


class ReadOnlyAdmin(ReadOnly, admin.ModelAdmin):
    pass


class RequirementInline(ReadOnly, admin.TabularInline):
    model = Requirement
    fields = ["name", "gate", "scope", "unit", "test", "rerunnable", "retired_at"]
    extra = 0
    show_change_link = True


class ThresholdInline(ReadOnly, admin.TabularInline):
    model = ThresholdRule
    fields = ["metric", "statistic", "comparator", "threshold", "site"]
    extra = 0


@admin.register(AcceptancePolicy)
class AcceptancePolicyAdmin(ReadOnlyAdmin):
    list_display = ["resource_class", "version", "updated_at"]
    search_fields = ["resource_class"]
    inlines = [RequirementInline]


@admin.register(Requirement)
class RequirementAdmin(ReadOnlyAdmin):
    list_display = ["name", "policy", "gate", "scope", "unit", "test", "rerunnable", "retired_at"]
    list_filter = ["gate", "scope", "rerunnable", "policy"]
    search_fields = ["name", "test", "policy__resource_class"]
    inlines = [ThresholdInline]


@admin.register(ThresholdRule)
class ThresholdRuleAdmin(ReadOnlyAdmin):
    list_display = ["requirement", "metric", "statistic", "comparator", "threshold", "site"]
    list_filter = ["comparator", "site"]
    search_fields = ["metric", "requirement__name"]


@admin.register(ParameterProfile)
class ParameterProfileAdmin(ReadOnlyAdmin):
    list_display = ["resource_class", "test", "name", "created_at"]
    list_filter = ["resource_class", "test"]
    search_fields = ["resource_class", "test", "name"]
