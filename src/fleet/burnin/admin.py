"""Burn-in evidence and the projection are owned by agents and reconcile: read-only here."""

from django.contrib import admin

from fleet.burnin.models import (
    DeviceDiagnosis,
    EvaluationResult,
    IsolationPlan,
    PolicyProgress,
    ReconcileSweep,
    TestExecution,
)
from fleet.core.admin import ViewOnlyAdmin


@admin.register(TestExecution)
class TestExecutionAdmin(ViewOnlyAdmin):
    list_display = ["id", "test", "requirement", "device", "topology", "status", "updated_at"]
    list_filter = ["status", "test", "site"]
    search_fields = ["id", "device__hostname", "topology__label", "requirement__name"]
    list_select_related = ["requirement", "device", "topology"]


@admin.register(EvaluationResult)
class EvaluationResultAdmin(ViewOnlyAdmin):
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
class PolicyProgressAdmin(ViewOnlyAdmin):
    """Rows can be deleted by hand: the operator intervention a tripped cleanup guard asks for."""

    list_display = ["requirement", "device", "topology", "verdict", "policy_version", "reconciled_at"]
    list_filter = ["verdict", "site", "resource_class", "gate"]
    search_fields = ["device__hostname", "topology__label", "requirement__name"]
    list_select_related = ["requirement", "device", "topology"]

    def has_delete_permission(self, request, obj=None):
        return request.user.has_perm("burnin.delete_policyprogress")


@admin.register(ReconcileSweep)
class ReconcileSweepAdmin(ViewOnlyAdmin):
    """Each scope's last complete sweep: how fresh its projection is."""

    list_display = ["site", "satellite", "resource_class", "gate", "completed_at", "target_count", "deferred"]
    list_filter = ["site", "resource_class", "guard_tripped"]
    list_select_related = ["site", "satellite"]


@admin.register(IsolationPlan)
class IsolationPlanAdmin(ViewOnlyAdmin):
    """Culprit isolation plans: driven by `fleet isolate` or the API, read-only here."""

    list_display = ["topology", "requirement", "status", "max_rounds", "created_at", "finished_at"]
    list_filter = ["status", "site"]
    search_fields = ["id", "topology__label", "requirement__name"]
    list_select_related = ["topology", "requirement"]


@admin.register(DeviceDiagnosis)
class DeviceDiagnosisAdmin(ViewOnlyAdmin):
    list_display = ["device", "topology", "requirement", "finding", "created_at"]
    search_fields = ["device__hostname", "topology__label"]
    list_select_related = ["device", "topology", "requirement"]
