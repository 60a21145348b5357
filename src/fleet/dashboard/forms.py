"""The dashboard's query parameters and form posts, parsed and checked in one place each (the
filter names are the API's where they mean the same thing)."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from typing import Any

from django import forms
from django.core.exceptions import NON_FIELD_ERRORS

from fleet.burnin.reads.failures import FAILURE_ORDERS, NOT_PASSING
from fleet.burnin.reads.filters import RackChoice, RackChoices, SiteFilterValues
from fleet.burnin.reruns.selection import RerunTarget
from fleet_rules.vocabulary import JobStatus, PlanningMode, RepairRerun, Verdict

#: How many known values an "unknown …" message lists (a site's racks may be thousands; the
#: select beside the message holds them all).
KNOWN_LISTED = 20
#: How much of an unknown value the message repeats.
VALUE_SHOWN = 60


def unknown_value(noun: str, value: str, known: Sequence[str], *, uncounted: bool = False) -> forms.ValidationError:
    """`unknown resource class 'h200' (known: gpu.gb200.nvl72, gpu.h200.8x)`: the value as given
    (cut short), then what it could have been (`uncounted`: `known` is only the first of them)."""
    shown = value if len(value) <= VALUE_SHOWN else value[:VALUE_SHOWN] + "…"
    listed = ", ".join(known[:KNOWN_LISTED])
    if uncounted and known:
        listed += " and more"
    elif len(known) > KNOWN_LISTED:
        listed += f" and {len(known) - KNOWN_LISTED} more"
    return forms.ValidationError(
        "unknown %(noun)s '%(value)s' (known: %(known)s)",
        code="unknown",
        params={"noun": noun, "value": shown, "known": listed or "none"},
    )


class KnownValueField(forms.CharField):
    """A filter naming something that exists: its known values are given per request (what the
    site holds), and any other value is an error naming it with the known ones listed."""

    def __init__(self, *, noun: str, known: Sequence[str] = (), **kwargs: Any) -> None:
        kwargs.setdefault("required", False)
        super().__init__(**kwargs)
        self.noun = noun
        self.known: Sequence[str] = known

    def validate(self, value: Any) -> None:
        super().validate(value)
        if value not in self.empty_values and value not in self.known:
            raise unknown_value(self.noun, value, self.known)


#: Parameters the pages' own live parts send (htmx's `fragment`), taken but never offered to a person.
INTERNAL_PARAMETERS = frozenset({"fragment"})


class QueryForm(forms.Form):
    """A page's query string, declared: a parameter the page does not take (a misspelt filter
    name) is an error naming it, not a filter silently ignored. `fragment` is htmx's live part."""

    #: Parameters read elsewhere than this form.
    also_taken: tuple[str, ...] = ("fragment",)

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        taken = [*self.fields, *self.also_taken]
        listed = [name for name in taken if name not in INTERNAL_PARAMETERS]  # what a person may type
        for name in self.data:
            if name not in taken:
                self.add_error(None, unknown_value("parameter", name, listed))
        return data


def _know(form: forms.Form, name: str, values: Sequence[str]) -> None:
    """Give a form's `KnownValueField` this request's known values."""
    field = form.fields[name]
    assert isinstance(field, KnownValueField)
    field.known = values


class GridFilterForm(QueryForm):
    """The grid's query. Without a resource class it opens on the class in trouble (the most
    failed or errored targets); the racks it may name are those holding a device of the chosen
    class (and satellite), so the filter and the rack picker offer only those (`racks`)."""

    resource_class = KnownValueField(noun="resource class")
    satellite = KnownValueField(noun="satellite")
    topology = forms.CharField(required=False, label="rack / topology")  # checked against `racks`
    verdict = KnownValueField(noun="verdict", known=Verdict.values)
    after = forms.CharField(required=False, max_length=255, widget=forms.HiddenInput)

    def __init__(
        self,
        data: Any,
        *,
        known: SiteFilterValues,
        racks: Callable[[str, str | None], RackChoices],
        rack_named: Callable[[str, str | None, str], bool],
    ) -> None:
        super().__init__(data)
        self.known_values = known
        _know(self, "resource_class", known.resource_classes)
        _know(self, "satellite", known.satellites)
        self._racks_of = racks
        self._rack_named = rack_named
        self.racks: list[RackChoice] = []
        self.more_racks = False  # more than the choices list: the filter is typed, not picked

    def clean_resource_class(self) -> str:
        return self.cleaned_data["resource_class"] or self.known_values.troubled_class

    def clean_topology(self) -> str:
        value = self.cleaned_data["topology"]
        if "resource_class" not in self.cleaned_data or "satellite" not in self.cleaned_data:
            return value  # the class or satellite is unknown: that is the error to show
        rc, satellite = self.cleaned_data["resource_class"], self.cleaned_data["satellite"] or None
        found = self._racks_of(rc, satellite)
        self.racks, self.more_racks = found.choices, found.more
        # A named rack is always looked up (one query whatever the class holds): the choices may
        # list only the first of them.
        if value and not self._rack_named(rc, satellite, value):
            labels = [r.label for r in self.racks]
            raise unknown_value("rack / topology", value, labels, uncounted=self.more_racks)  # as labelled
        return value


class FailureFilterForm(QueryForm):
    """The failures list's query (the page and its CSV): the requirements it may name are the
    chosen class's, or every class's at the site."""

    resource_class = KnownValueField(noun="resource class")
    requirement = forms.CharField(required=False)  # checked against the chosen class's requirements
    verdict = KnownValueField(noun="verdict", known=[str(v) for v in NOT_PASSING])
    satellite = KnownValueField(noun="satellite")
    order = KnownValueField(noun="order", known=list(FAILURE_ORDERS))
    page = forms.IntegerField(required=False, min_value=0, max_value=100_000)

    def __init__(self, data: Any, *, known: SiteFilterValues) -> None:
        super().__init__(data)
        self.known_values = known
        _know(self, "resource_class", known.resource_classes)
        _know(self, "satellite", known.satellites)

    def clean_requirement(self) -> str:
        value = self.cleaned_data["requirement"]
        names = self.known_values.requirement_names(self.cleaned_data.get("resource_class") or None)
        if value and value not in names:
            raise unknown_value("requirement", value, names)
        return value


class JobsQueryForm(QueryForm):
    """The jobs list's query: which site and statuses, and the page's keyset (both halves or
    neither). A parameter it cannot read is a 400 naming it, never a 500 or a silently wider list."""

    site = KnownValueField(noun="site")
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

    def __init__(self, data: Any, *, sites: Sequence[str]) -> None:
        super().__init__(data)
        _know(self, "site", sites)

    def clean(self) -> dict[str, Any]:
        data = super().clean()
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


class TargetsField(forms.Field):
    """Ticked failure rows: repeated `target=<device uuid>:<requirement>` fields."""

    widget = forms.MultipleHiddenInput

    def to_python(self, value: Any) -> list[RerunTarget]:
        targets = []
        for item in value or []:
            device, _, requirement = str(item).partition(":")
            problem = forms.ValidationError(f"{str(item)[:VALUE_SHOWN]!r} is not a target (device id:requirement).")
            try:
                targets.append(RerunTarget(uuid.UUID(device), requirement))
            except ValueError as exc:
                raise problem from exc
            if not requirement:
                raise problem
        return targets


class RerunForm(forms.Form):
    """What to rerun: ticked devices, ticked failure rows (targets: a device's one requirement),
    every device with a failed or errored requirement, or a topology's members; and how
    (`non_passing` by default)."""

    device = DeviceIdsField(required=False)
    target = TargetsField(required=False)
    select = forms.ChoiceField(required=False, choices=[("", ""), (ALL_FAILED, "every failing device")])
    topology = forms.CharField(required=False, max_length=100)
    mode = forms.ChoiceField(choices=PlanningMode.choices, required=False)

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        if not (data.get("device") or data.get("target") or data.get("select") or data.get("topology")):
            raise forms.ValidationError("Select devices, a rack, every failing device, or failure rows.")
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


class RepairForm(forms.Form):
    """A repair as an operator records it on the dashboard: what was done, at most one swapped part
    (the API takes any number), and what the re-burn-in runs."""

    token = forms.UUIDField(error_messages=TOKEN_ERRORS)
    confirm = forms.BooleanField(error_messages=CONFIRM_ERRORS)
    summary = forms.CharField(max_length=2000, strip=True)
    part_kind = forms.CharField(max_length=64, required=False, strip=True)
    part_slot = forms.CharField(max_length=64, required=False, strip=True)
    removed_serial = forms.CharField(max_length=128, required=False, strip=True)
    installed_serial = forms.CharField(max_length=128, required=False, strip=True)
    rerun = forms.ChoiceField(choices=RepairRerun.choices, initial=RepairRerun.ALL)

    def parts(self) -> list[dict[str, str]]:
        data = self.cleaned_data
        if not data.get("part_kind"):
            return []
        return [
            {
                "kind": data["part_kind"],
                "slot": data.get("part_slot", ""),
                "removed_serial": data.get("removed_serial", ""),
                "installed_serial": data.get("installed_serial", ""),
            }
        ]


class BreakerResetForm(forms.Form):
    token = forms.UUIDField(error_messages=TOKEN_ERRORS)
    confirm = forms.BooleanField(error_messages=CONFIRM_ERRORS)
    reason = forms.CharField(max_length=2000, strip=True)


class AutopilotPauseForm(forms.Form):
    token = forms.UUIDField(error_messages=TOKEN_ERRORS)
    confirm = forms.BooleanField(error_messages=CONFIRM_ERRORS)
    reason = forms.CharField(max_length=2000, strip=True)


class AutopilotResumeForm(forms.Form):
    token = forms.UUIDField(error_messages=TOKEN_ERRORS)
    confirm = forms.BooleanField(error_messages=CONFIRM_ERRORS)


class IsolationForm(forms.Form):
    """Which failed cohort: a topology (its id) and the multi-node requirement it failed."""

    topology = forms.UUIDField(error_messages={"invalid": "Enter a topology id (a UUID)."})
    requirement = forms.CharField(max_length=100)


class IsolationDispatchForm(IsolationForm):
    token = forms.UUIDField(error_messages=TOKEN_ERRORS)
    confirm = forms.BooleanField(error_messages=CONFIRM_ERRORS)
