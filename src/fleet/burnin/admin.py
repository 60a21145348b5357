"""Burn-in evidence and the projection are owned by agents and reconcile: read-only here."""

from typing import Any

from django import forms
from django.contrib import admin, messages
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect

from fleet.burnin.certificates.acceptance import OVERRIDE_PERMISSION, overrides_record, refusal, uncertified
from fleet.burnin.models import (
    AcceptanceCertificate,
    AcceptanceOverride,
    DeviceDiagnosis,
    EvaluationResult,
    FingerprintSnapshot,
    IsolationPlan,
    PolicyProgress,
    ReconcileSweep,
    TestExecution,
)
from fleet.core.admin import ViewOnlyAdmin
from fleet.core.exceptions import Conflict
from fleet.inventory.admin import DeviceAdmin
from fleet.inventory.models import Device
from fleet.lifecycle.services import device_transition
from fleet_rules.lifecycle import refusal as lifecycle_refusal
from fleet_rules.vocabulary import DeviceState, Mover, TransitionCause


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


@admin.register(AcceptanceCertificate)
class AcceptanceCertificateAdmin(ViewOnlyAdmin):
    list_display = [
        "serial",
        "device",
        "resource_class",
        "policy_version",
        "issued_at",
        "valid_until",
        "supersede_reason",
    ]
    list_filter = ["supersede_reason", "resource_class", "site"]
    search_fields = ["serial", "device__hostname", "sha256"]
    list_select_related = ["device"]


@admin.register(FingerprintSnapshot)
class FingerprintSnapshotAdmin(ViewOnlyAdmin):
    list_display = ["sha256", "device", "first_seen_at", "last_seen_at", "reports", "replaced_at"]
    search_fields = ["sha256", "device__hostname"]
    list_select_related = ["device"]


@admin.register(AcceptanceOverride)
class AcceptanceOverrideAdmin(ViewOnlyAdmin):
    list_display = ["device", "actor", "reason", "created_at"]
    search_fields = ["device__hostname", "actor"]


# --- the acceptance gate in the device admin ------------------------------------------------------
# Inventory's device admin, gated: burn-in owns the rule (inventory imports no burn-in), so the
# gated admin replaces inventory's registration here.


class GatedDeviceForm(forms.ModelForm):
    acceptance_override_reason = forms.CharField(
        required=False,
        widget=forms.Textarea(attrs={"rows": 2}),
        help_text="Only to accept a device without a valid acceptance certificate (needs the "
        "burnin.add_acceptanceoverride permission; recorded with your name).",
    )

    class Meta:
        model = Device
        fields = ["site", "satellite", "hostname", "serial", "resource_class", "state", "enrolled_at"]

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        before, wanted = self.initial.get("state"), data.get("state")
        if not self.instance._state.adding and wanted and before and wanted != before:
            why = lifecycle_refusal(before, wanted, Mover.OPERATOR, TransitionCause.OPERATOR)
            if why is not None:
                raise forms.ValidationError({"state": why})
        accepting = data.get("state") == DeviceState.ACCEPTED and (
            self.instance._state.adding or self.initial.get("state") != DeviceState.ACCEPTED
        )
        self.forced = False
        if accepting and (self.instance._state.adding or uncertified([self.instance.id])):
            reason = (data.get("acceptance_override_reason") or "").strip()
            user = getattr(self, "user", None)
            if not reason or user is None or not user.has_perm(OVERRIDE_PERMISSION):
                raise forms.ValidationError({"state": refusal(self.instance.hostname or "this device")})
            self.forced = True
        return data


class GatedDeviceAdmin(DeviceAdmin):
    form = GatedDeviceForm

    def get_form(self, request: HttpRequest, obj: Any = None, change: bool = False, **kwargs: Any) -> Any:
        form = super().get_form(request, obj, change=change, **kwargs)

        class WithUser(form):  # type: ignore[valid-type,misc]
            user = request.user

        return WithUser

    def changeform_view(
        self, request: HttpRequest, object_id: str | None = None, form_url: str = "", extra_context: Any = None
    ) -> HttpResponse:
        # The admin's transaction ends with the refusal: nothing of the change is kept, and the
        # page says why (a change of state that lost a race to another writer is a 409 in the API).
        try:
            return super().changeform_view(request, object_id, form_url, extra_context)
        except Conflict as refused:
            self.message_user(request, refused.detail, level=messages.ERROR)
            return HttpResponseRedirect(request.get_full_path())

    def save_model(self, request: HttpRequest, obj: Any, form: Any, change: bool) -> None:
        forced = getattr(form, "forced", False)
        if change and "state" in form.changed_data:
            # A change of state goes through the lifecycle's writer (history, compare-and-set on
            # the state the form was opened with); the other fields are saved without it.
            wanted, obj.state = obj.state, form.initial["state"]
            fields = [f for f in form.changed_data if f != "state" and f in {x.name for x in Device._meta.fields}]
            if fields:
                obj.save(update_fields=[*fields, "updated_at"])
            actor = f"user:{request.user.get_username()}"
            reason = form.cleaned_data.get("acceptance_override_reason", "").strip() or "changed in the admin"
            obj.state = device_transition(
                device_id=obj.id,
                to=DeviceState(wanted),
                mover=Mover.OPERATOR,
                actor=actor,
                reason=reason,
                certified=not forced,
                force=forced,
                expected=DeviceState(form.initial["state"]),
            ).device.state
        else:
            super().save_model(request, obj, form, change)  # a new device is born in its state
        if forced:
            overrides_record(
                device_ids=[obj.id],
                actor=f"user:{request.user.get_username()}",
                reason=form.cleaned_data["acceptance_override_reason"].strip(),
            )


admin.site.unregister(Device)
admin.site.register(Device, GatedDeviceAdmin)
