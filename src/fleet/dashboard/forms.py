"""The dashboard's query parameters and form posts, parsed and checked in one place each (the
filter names are the API's where they mean the same thing)."""

from __future__ import annotations

import uuid
from typing import Any

from django import forms
from django.core.exceptions import NON_FIELD_ERRORS

from fleet.burnin.reads.failures import FAILURE_ORDERS, NOT_PASSING
from fleet_rules.vocabulary import JobStatus, PlanningMode, Verdict


class GridFilterForm(forms.Form):
    resource_class = forms.CharField(required=False, max_length=255)
    topology = forms.CharField(required=False, max_length=100, label="rack / topology")
    verdict = forms.ChoiceField(required=False, choices=[("", "any verdict"), *Verdict.choices])
    satellite = forms.CharField(required=False, max_length=100)
    after = forms.CharField(required=False, max_length=255, widget=forms.HiddenInput)


class FailureFilterForm(forms.Form):
    resource_class = forms.CharField(required=False, max_length=255)
    requirement = forms.CharField(required=False, max_length=100)
    verdict = forms.ChoiceField(required=False, choices=[("", "failed or errored"), *((v, v) for v in NOT_PASSING)])
    satellite = forms.CharField(required=False, max_length=100)
    order = forms.ChoiceField(required=False, choices=[(o, o) for o in FAILURE_ORDERS])
    page = forms.IntegerField(required=False, min_value=0, max_value=100_000)


class JobsQueryForm(forms.Form):
    """The jobs list's query: which site and statuses, and the page's keyset (both halves or
    neither). A parameter it cannot read is a 400 naming it, never a 500 or a silently wider list."""

    site = forms.SlugField(required=False, max_length=100)
    status = forms.MultipleChoiceField(
        required=False,
        choices=[(s, s) for s in JobStatus.values],
        error_messages={"invalid_choice": f"%(value)s is not a job status ({', '.join(JobStatus.values)})."},
    )
    before_at = forms.DateTimeField(
        required=False,
        error_messages={"invalid": "Enter a date and time such as 2026-12-03T09:00:00+00:00."},
    )
    before_id = forms.UUIDField(required=False, error_messages={"invalid": "Enter a job id (a UUID)."})

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        for given, missing in (("before_at", "before_id"), ("before_id", "before_at")):
            if data.get(given) and not data.get(missing) and missing not in self.errors:
                self.add_error(missing, f"Required with {given}: a page of older jobs starts at both.")
        return data


def query_problems(form: forms.Form) -> str:
    """A query form's errors as one line naming each parameter (`before_at: Enter …`)."""
    parts = []
    for name, messages in form.errors.items():
        text = " ".join(str(m) for m in messages)
        parts.append(text if name == NON_FIELD_ERRORS else f"{name}: {text}")
    return "; ".join(parts)


#: Selections the rerun form takes besides ticked devices, resolved on the server (so selecting
#: a whole site's failures never posts thousands of fields).
ALL_FAILED = "every-failing-device"


class DeviceIdsField(forms.Field):
    """Ticked devices: repeated `device=<uuid>` fields."""

    widget = forms.MultipleHiddenInput

    def to_python(self, value: Any) -> list[uuid.UUID]:
        ids = []
        for item in value or []:
            try:
                ids.append(uuid.UUID(str(item)))
            except ValueError as exc:
                raise forms.ValidationError(f"{item!r} is not a device id.") from exc
        return ids


class RerunForm(forms.Form):
    """What to rerun: ticked devices, every device with a failed or errored requirement, or a
    topology's members; and how (`non_passing` by default)."""

    device = DeviceIdsField(required=False)
    select = forms.ChoiceField(required=False, choices=[("", ""), (ALL_FAILED, "every failing device")])
    topology = forms.CharField(required=False, max_length=100)
    mode = forms.ChoiceField(choices=PlanningMode.choices, required=False)

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        if not (data.get("device") or data.get("select") or data.get("topology")):
            raise forms.ValidationError("Select devices, a rack, or every failing device.")
        data["mode"] = PlanningMode(data.get("mode") or PlanningMode.NON_PASSING)
        return data


class WhatIfForm(forms.Form):
    """A candidate fleet file, uploaded to see what its thresholds would flip."""

    candidate = forms.FileField(label="candidate fleet file (YAML)")


# --- state-changing actions (Post/Redirect/Get with a one-time token: fleet.jobs.receipts) -----------------

TOKEN_ERRORS = {"required": "This form carries no token: open a new preview.", "invalid": "Not a form token."}
CONFIRM_ERRORS = {"required": "Tick the confirmation: it states what will happen."}


class RerunDispatchForm(forms.Form):
    """A preview's dispatch button: its token, the plan it showed (`expect`: how many devices and
    their key) and, for more than one device, the ticked confirmation."""

    token = forms.UUIDField(error_messages=TOKEN_ERRORS)
    expect = forms.RegexField(r"^[0-9]{1,6}:[0-9a-f]{64}$", error_messages={"invalid": "Not a preview's plan."})
    confirm = forms.BooleanField(required=False)

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        if data.get("expect") and int(data["expect"].split(":")[0]) > 1 and not data.get("confirm"):
            self.add_error("confirm", CONFIRM_ERRORS["required"])
        return data


class CancelForm(forms.Form):
    token = forms.UUIDField(error_messages=TOKEN_ERRORS)
    confirm = forms.BooleanField(error_messages=CONFIRM_ERRORS)


class IsolationForm(forms.Form):
    """Which failed cohort: a topology (its id) and the multi-node requirement it failed."""

    topology = forms.UUIDField(error_messages={"invalid": "Enter a topology id (a UUID)."})
    requirement = forms.CharField(max_length=100)


class IsolationDispatchForm(IsolationForm):
    token = forms.UUIDField(error_messages=TOKEN_ERRORS)
    confirm = forms.BooleanField(error_messages=CONFIRM_ERRORS)
