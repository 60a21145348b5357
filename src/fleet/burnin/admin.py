"""Burn-in evidence and the projection are owned by agents and reconcile: read-only here."""

from django.contrib import admin

from fleet.burnin.models import EvaluationResult, PolicyProgress, ReconcileSweep, TestExecution


class AgentOwnedAdmin(admin.ModelAdmin):
    """View-only: no Save or Delete button (agents and reconcile write these rows)."""

    def get_readonly_fields(self, request, obj=None):
        return [f.name for f in self.model._meta.fields]

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False


@admin.register(TestExecution)
class TestExecutionAdmin(AgentOwnedAdmin):
    list_display = ["id", "test", "requirement", "device", "topology", "status", "updated_at"]
    list_filter = ["status", "test", "site"]
    search_fields = ["id", "device__hostname", "topology__label", "requirement__name"]
    list_select_related = ["requirement", "device", "topology"]


@admin.register(EvaluationResult)
class EvaluationResultAdmin(AgentOwnedAdmin):
    list_display = ["execution", "passed", "evaluation_source_key", "materialised_at"]
    list_filter = ["passed"]
    search_fields = [
        "execution__id",
        "execution__device__hostname",
        "execution__topology__label",
        "evaluation_source_key",
    ]
    list_select_related = ["execution", "execution__device", "execution__topology", "execution__requirement"]


@admin.register(PolicyProgress)
class PolicyProgressAdmin(AgentOwnedAdmin):
    """Rows can be deleted by hand: the operator intervention a tripped cleanup guard asks for."""

    list_display = ["requirement", "device", "topology", "verdict", "policy_version", "reconciled_at"]
    list_filter = ["verdict", "site", "resource_class", "gate"]
    search_fields = ["device__hostname", "topology__label", "requirement__name"]
    list_select_related = ["requirement", "device", "topology"]

    def has_delete_permission(self, request, obj=None):
        return request.user.has_perm("burnin.delete_policyprogress")


@admin.register(ReconcileSweep)
class ReconcileSweepAdmin(AgentOwnedAdmin):
    """Each scope's last complete sweep: how fresh its projection is."""

    list_display = ["site", "satellite", "resource_class", "gate", "completed_at", "target_count", "deferred"]
    list_filter = ["site", "resource_class", "guard_tripped"]
    list_select_related = ["site", "satellite"]
