"""Serializers of the burn-in API. Names and docstrings of the seed operations' serializers are
the spec's component names and descriptions (drf-spectacular derives them from these)."""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping
from typing import Any

from django.conf import settings
from django.http import QueryDict
from rest_framework import serializers
from rest_framework.exceptions import ValidationError

from fleet.burnin.api.fingerprint_serializers import InventorySerializer
from fleet.burnin.execution_document import ExecutionHealthSerializer, MetricReadingSerializer, TestExecutionSerializer
from fleet.core.errors import flatten_field_errors
from fleet.core.fields import (
    JSONObjectField,
    MetricDisplayValueField,
    StrictBooleanField,
    StrictCharField,
    StrictChoiceField,
    StrictDateTimeField,
    StrictIntegerField,
    StrictRegexField,
    StrictUUIDField,
)
from fleet.core.parsers import storable_json_problem
from fleet.core.serializers import ResolvedRuleSerializer
from fleet.inventory.models import SLUG_PATTERN
from fleet_rules.health_evidence import MAX_MEMBERS
from fleet_rules.vocabulary import (
    Comparator,
    ExclusionReason,
    ExecutionStatus,
    GpuVendor,
    PlanningMode,
    SkipReason,
    TopologyUnit,
    WorkflowName,
)

__all__ = ["MetricReadingSerializer", "TestExecutionSerializer"]  # defined with the execution document

SOURCE_KEY_HELP = (
    "SHA-256 hex digest of the resolved thresholds the agent evaluated with. A write is rejected as stale "
    "when this no longer matches the API's current threshold resolution (mid-rollout version skew)."
)


def decode_json_form_field(data: Any, field: str) -> tuple[Any, bool]:
    """Form and multipart bodies cannot nest: they carry a nested field as one JSON-encoded value
    (e.g. `results=[{...}]`). Returns the body as a dict and whether it was decoded from a form."""
    if not isinstance(data, QueryDict):
        return data, False

    raw = data.get(field)
    if raw is None:
        return {}, True
    try:
        value = json.loads(raw)
    except (TypeError, ValueError) as exc:
        raise ValidationError(
            {field: [f"In a form or multipart body, `{field}` must be one JSON-encoded value ({exc})."]}
        ) from exc
    problem = storable_json_problem(value, field)
    if problem:
        raise ValidationError({field: [problem]})
    return {field: value}, True


# --- evaluation results upsert (spec: evaluation-results-upsert.yaml) --------------------------


class ThresholdResultSerializer(serializers.Serializer):
    """Atomic result of comparing a value against a threshold."""

    passed = StrictBooleanField()
    threshold = MetricDisplayValueField(allow_null=True)
    comparator = StrictChoiceField(choices=Comparator.choices, allow_null=True)


class BurnInMetricEvaluationSchemaSerializer(serializers.Serializer):
    """Per-metric materialised threshold evaluation."""

    passed = StrictBooleanField()
    value_evaluation = ThresholdResultSerializer(allow_null=True, required=False)
    statistic_evaluations = serializers.DictField(child=ThresholdResultSerializer(), allow_null=True, required=False)


class BurnInEvaluationResultPayloadSchemaSerializer(serializers.Serializer):
    """Materialised EvaluationResult payload."""

    passed = StrictBooleanField()
    reason = StrictCharField(allow_null=True, allow_blank=True, required=False)
    metric_evaluations = serializers.DictField(child=BurnInMetricEvaluationSchemaSerializer(), required=False)


class BurnInEvaluationResultItemSerializer(serializers.Serializer):
    """One materialised evaluation result posted by the agent."""

    execution_id = StrictUUIDField()
    evaluation_result = BurnInEvaluationResultPayloadSchemaSerializer()
    evaluation_source_key = StrictRegexField(r"^[0-9a-f]{64}$", help_text=SOURCE_KEY_HELP)
    expected_updated_at = StrictDateTimeField()


class BurnInEvaluationResultsRequestSerializer(serializers.Serializer):
    """Bulk materialisation result upsert request."""

    results = BurnInEvaluationResultItemSerializer(many=True)

    def to_internal_value(self, data: Any) -> Any:
        data, from_form = decode_json_form_field(data, "results")
        if from_form:
            self._context["typed_body"] = True  # the decoded value is JSON: types count again
        results = data.get("results") if isinstance(data, Mapping) else None
        limit = settings.FLEET["EVALUATION_RESULTS_MAX_ITEMS"]
        if isinstance(results, list) and len(results) > limit:
            raise ValidationError({"results": [f"At most {limit} results per request; got {len(results)}."]})
        problems: dict[str, list[str]] = {}
        value = None
        try:
            value = super().to_internal_value(data)
        except ValidationError as exc:
            for path, messages in flatten_field_errors(exc.detail):
                problems.setdefault(path, []).extend(messages)
        for path, message in _duplicate_execution_ids(results):
            problems.setdefault(path, []).append(message)
        if problems:
            raise ValidationError(problems)
        return value


def _duplicate_execution_ids(results: Any) -> list[tuple[str, str]]:
    if not isinstance(results, list):
        return []
    seen: dict[Any, list[int]] = {}
    for index, item in enumerate(results):
        if isinstance(item, Mapping) and isinstance(item.get("execution_id"), str):
            try:  # every spelling DRF accepts for one UUID is one execution
                key: Any = uuid.UUID(item["execution_id"])
            except ValueError:
                key = item["execution_id"]
            seen.setdefault(key, []).append(index)
    duplicates = []
    for indices in seen.values():
        if len(indices) > 1:
            for index in indices:
                others = ", ".join(f"results.{i}" for i in indices if i != index)
                duplicates.append(
                    (f"results.{index}.execution_id", f"The same execution_id appears more than once (also {others}).")
                )
    return sorted(duplicates, key=lambda d: int(d[0].split(".")[1]))


class BurnInEvaluationResultsResponseSerializer(serializers.Serializer):
    """Bulk materialisation result upsert response."""

    written = serializers.IntegerField(min_value=0)
    unchanged = serializers.IntegerField(min_value=0)
    stale = serializers.IntegerField(min_value=0)
    invalid = serializers.IntegerField(min_value=0)


# --- execution reporting -----------------------------------------------------------------------


class MemberHealthSerializer(serializers.Serializer):
    """One member node's window of a multi-node execution: its kernel-logged GPU events."""

    device_id = StrictUUIDField()
    health = ExecutionHealthSerializer()


class TestExecutionReportSerializer(serializers.Serializer):
    """What an agent reports about one execution (the full state; a replay changes nothing)."""

    requirement = StrictCharField(required=False, max_length=100, help_text="Requirement name (or give `test`).")
    test = StrictCharField(required=False, max_length=100)
    device_id = StrictUUIDField(required=False, allow_null=True, help_text="Single-node executions.")
    topology_id = StrictUUIDField(required=False, allow_null=True, help_text="Multi-node executions.")
    job_id = StrictUUIDField(required=False, allow_null=True)
    status = StrictChoiceField(choices=ExecutionStatus.choices)
    parameters = JSONObjectField(required=False, default=dict)
    metrics = serializers.DictField(child=MetricReadingSerializer(), required=False, default=dict)
    error = StrictCharField(required=False, allow_blank=True, default="", max_length=10000)
    started_at = StrictDateTimeField(required=False, allow_null=True, default=None)
    finished_at = StrictDateTimeField(required=False, allow_null=True, default=None)
    health = ExecutionHealthSerializer(
        required=False,
        default=None,
        allow_null=True,
        help_text=(
            "Single-node executions only: the burn-in window's kernel-logged Xid/SXid events, ECC counters "
            "before and after, throttle reasons seen. Once stored it is replaced by a report that carries "
            "another one, never erased by one that carries none. A fatal Xid moves the device to needs_repair."
        ),
    )
    inventory = InventorySerializer(
        required=False,
        allow_null=True,
        default=None,
        help_text="The device's hardware fingerprint, read at the start of the job (single-device executions only).",
    )
    member_health = serializers.ListField(
        child=MemberHealthSerializer(),
        required=False,
        allow_null=True,
        default=None,
        max_length=MAX_MEMBERS,
        help_text=(
            "Multi-node executions only: each member node's kernel-logged GPU events during the collective's "
            "window (`health` as a health window's). Judged together when the execution finishes: a code most of "
            "the job's devices logged is the workload's (the execution is errored, no device moves); fewer take "
            "each device's remediation ladder (docs/remediation.md). Not stored."
        ),
    )

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        problems: dict[str, list[str]] = {}
        members = attrs.get("member_health")
        if members is not None and attrs.get("device_id"):
            problems["member_health"] = ["Only a multi-node execution (topology_id) carries member_health."]
        if members is not None and len({m["device_id"] for m in members}) != len(members):
            problems["member_health"] = ["Each device at most once."]
        if attrs.get("inventory") is not None and attrs.get("topology_id"):
            problems["inventory"] = ["Only a single-device execution (device_id) carries an inventory."]
        if not attrs.get("requirement") and not attrs.get("test"):
            problems["requirement"] = ["Give the requirement name, or the test."]
        if bool(attrs.get("device_id")) == bool(attrs.get("topology_id")):
            problems["device_id"] = ["Give exactly one of device_id (single-node) and topology_id (multi-node)."]
        if attrs.get("health") is not None and attrs.get("topology_id"):
            problems["health"] = ["Health evidence belongs to a single device's execution, not a topology's."]
        started, finished = attrs.get("started_at"), attrs.get("finished_at")
        if started and finished and finished < started:
            problems["finished_at"] = ["finished_at is before started_at."]
        if attrs["status"] == ExecutionStatus.RUNNING and finished:
            problems["finished_at"] = ["A running execution has no finished_at."]
        if problems:
            raise ValidationError(problems)
        attrs["metrics"] = _plain(attrs["metrics"])
        if attrs.get("health") is not None:
            # stored as JSON in the shape the API returns it (times as ISO 8601 strings)
            attrs["health"] = _plain(ExecutionHealthSerializer(attrs["health"]).data)
        attrs["inventory"] = _plain(attrs["inventory"])
        if members is not None:
            attrs["member_health"] = [
                (m["device_id"], _plain(ExecutionHealthSerializer(m["health"]).data)) for m in members
            ]
        return attrs


def _plain(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


# --- pending-evaluation feed -------------------------------------------------------------------


class PendingEvaluationsQuerySerializer(serializers.Serializer):
    site_slug = serializers.RegexField(SLUG_PATTERN, max_length=100)
    satellite_name = serializers.CharField(max_length=100)
    limit = serializers.IntegerField(min_value=1, max_value=500, default=100)
    cursor = serializers.CharField(required=False, allow_null=True, allow_blank=True)


class PendingEvaluationSerializer(serializers.Serializer):
    execution_id = serializers.UUIDField()
    updated_at = serializers.DateTimeField(help_text="Echo it as expected_updated_at when posting the result.")
    status = serializers.ChoiceField(choices=ExecutionStatus.choices)
    requirement = serializers.CharField()
    test = serializers.CharField()
    device_id = serializers.UUIDField(allow_null=True)
    topology_id = serializers.UUIDField(allow_null=True)
    target_name = serializers.CharField(help_text="The device's hostname or the topology's label, for logs.")
    parameters = serializers.JSONField()
    metrics = serializers.DictField(child=MetricReadingSerializer())
    error = serializers.CharField(allow_blank=True)
    thresholds = ResolvedRuleSerializer(
        source="resolution.rules_list", many=True, help_text="The resolved thresholds to evaluate against."
    )
    evaluation_source_key = serializers.CharField(
        source="resolution.key", help_text="Their key: echo it with the result."
    )


class PendingEvaluationsPageSerializer(serializers.Serializer):
    results = PendingEvaluationSerializer(source="items", many=True)
    next_cursor = serializers.CharField(allow_null=True, help_text="Null on the last page.")


# --- policy-progress reconcile (spec: policy-progress-reconcile.yaml) ---------------------------


class BurnInPolicyProgressReconcileRequestSerializer(serializers.Serializer):
    site_slug = StrictRegexField(SLUG_PATTERN)
    satellite_name = StrictCharField()
    resource_class = StrictCharField(max_length=255)
    gate = StrictRegexField(r"^[a-z0-9][a-z0-9._-]*$", max_length=64, allow_null=True, required=False)
    limit = StrictIntegerField(min_value=1, max_value=500, default=500)
    cursor = StrictCharField(allow_null=True, required=False)


class BurnInPolicyProgressReconcileResponseSerializer(serializers.Serializer):
    written = serializers.IntegerField(min_value=0)
    unchanged = serializers.IntegerField(
        min_value=0,
        help_text="Rows already matching the derived verdict (freshness bumped only), including rows skipped "
        "because a concurrent reconcile wrote fresher state.",
    )
    deferred = serializers.IntegerField(
        min_value=0,
        help_text="Targets left unwritten this page because their evaluation is not materialised yet — "
        "distinguishes 'all matched' from 'all waiting on phase-1 lag' so the agent can tune its retry cadence.",
    )
    deleted = serializers.IntegerField(min_value=0)
    guard_tripped = serializers.BooleanField(
        help_text="True when end-of-sweep cleanup refused to delete rows whose target disappeared, because their "
        "count exceeded the deletion guard thresholds; those rows remain until a later sweep or operator "
        "intervention. Rows for requirements the policy has retired are deleted regardless, so a true "
        "guard_tripped can accompany a non-zero deleted count.",
    )
    next_cursor = serializers.CharField(
        allow_null=True, help_text="Cursor for the next page; null marks the final page of the sweep."
    )
    target_count = serializers.IntegerField(
        min_value=0,
        help_text="Total targets the policy expanded to across the whole sweep, not just this page. Zero means "
        "the policy loaded successfully but currently governs nothing (e.g. no enrolled devices carry its "
        "resource class) — the caller should surface that, since every other counter also reads zero in that "
        "state.",
    )


# --- projection reads --------------------------------------------------------------------------


class PolicyProgressSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    site = serializers.UUIDField(source="site_id")
    satellite = serializers.UUIDField(source="satellite_id")
    resource_class = serializers.CharField()
    requirement = serializers.CharField(source="requirement.name")
    requirement_id = serializers.UUIDField()
    gate = serializers.CharField()
    device = serializers.UUIDField(source="device_id", allow_null=True)
    device_hostname = serializers.CharField(source="device.hostname", allow_null=True, default=None)
    topology = serializers.UUIDField(source="topology_id", allow_null=True)
    topology_label = serializers.CharField(source="topology.label", allow_null=True, default=None)
    verdict = serializers.CharField()
    execution = serializers.UUIDField(source="execution_id", allow_null=True)
    evaluation_source_key = serializers.CharField(allow_null=True)
    policy_version = serializers.IntegerField()
    watermark = serializers.DateTimeField(allow_null=True)
    reconciled_at = serializers.DateTimeField()


class ProgressSummaryRowSerializer(serializers.Serializer):
    resource_class = serializers.CharField()
    requirement = serializers.CharField()
    gate = serializers.CharField()
    passed = serializers.IntegerField(min_value=0, source="counts.passed")
    failed = serializers.IntegerField(min_value=0, source="counts.failed")
    errored = serializers.IntegerField(min_value=0, source="counts.errored")
    not_run = serializers.IntegerField(min_value=0, source="counts.not_run")
    in_progress = serializers.IntegerField(min_value=0, source="counts.in_progress")
    total = serializers.IntegerField(min_value=0)


class ProgressSummarySerializer(serializers.Serializer):
    site_id = serializers.UUIDField()
    site_slug = serializers.CharField()
    rows = ProgressSummaryRowSerializer(many=True)


# --- rerun planning and dispatch (spec: rerun-plans-dispatch.yaml) -------------------------------


class RerunPlanDispatchRequestSerializer(serializers.Serializer):
    """Request body for live policy-aware rerun dispatch."""

    device_ids = serializers.ListField(
        child=StrictUUIDField(), min_length=1, help_text="Devices at the site to re-plan and dispatch reruns for."
    )
    mode = StrictChoiceField(choices=PlanningMode.choices, default=PlanningMode.NON_PASSING)


class RerunPlanTopologySerializer(serializers.Serializer):
    """Topology identity for one atomic rack-acceptance rerun cohort."""

    id = serializers.UUIDField()
    unit = serializers.ChoiceField(choices=TopologyUnit.choices)
    label = serializers.CharField()  # type: ignore[assignment]  # shadows Field.label, the caption


class DispatchedRerunJobSerializer(serializers.Serializer):
    """One Job created from the live rerun calculation."""

    job_id = serializers.UUIDField()
    workflow_name = serializers.ChoiceField(choices=WorkflowName.choices)
    topology = RerunPlanTopologySerializer(
        allow_null=True, help_text="Rack-acceptance topology identity; null for single-node jobs."
    )
    device_ids = serializers.ListField(child=serializers.UUIDField())


class RerunPlanSkipGroupSerializer(serializers.Serializer):
    """Devices skipped for one topology, resource class, requirement, and reason."""

    device_ids = serializers.ListField(child=serializers.UUIDField(), min_length=1)
    topology = RerunPlanTopologySerializer(
        allow_null=True, help_text="Rack-acceptance topology identity; null for single-node skips."
    )
    resource_class = serializers.CharField()
    requirement_name = serializers.CharField()
    reason = serializers.ChoiceField(choices=SkipReason.choices)


class RerunPlanExcludedDeviceSerializer(serializers.Serializer):
    """One selected device excluded from planning entirely."""

    device_id = serializers.UUIDField()
    reason = serializers.ChoiceField(choices=ExclusionReason.choices)


class RerunPlanDispatchResponseSerializer(serializers.Serializer):
    """Dispatch outcome: created jobs plus grouped typed skips."""

    created_jobs = DispatchedRerunJobSerializer(many=True)
    skips = RerunPlanSkipGroupSerializer(source="plan.skips", many=True)
    excluded_devices = RerunPlanExcludedDeviceSerializer(source="plan.exclusions", many=True)


class PlannedRequirementSerializer(serializers.Serializer):
    name = serializers.CharField()
    test = serializers.CharField()
    parameters = serializers.JSONField()
    parameter_profile = serializers.CharField(
        source="profile_name", help_text="Name of the parameter profile the parameters come from."
    )


class PlannedRerunJobSerializer(serializers.Serializer):
    """A job the dispatch would create now."""

    workflow_name = serializers.ChoiceField(choices=WorkflowName.choices)
    topology = RerunPlanTopologySerializer(allow_null=True)
    device_ids = serializers.ListField(child=serializers.UUIDField())
    requirements = PlannedRequirementSerializer(many=True)


class RerunPlanPreviewResponseSerializer(serializers.Serializer):
    """What a dispatch would do now: the same calculation, nothing created."""

    planned_jobs = PlannedRerunJobSerializer(many=True)
    skips = RerunPlanSkipGroupSerializer(source="plan.skips", many=True)
    excluded_devices = RerunPlanExcludedDeviceSerializer(source="plan.exclusions", many=True)


# --- reconcile scopes ----------------------------------------------------------------------------


class SatelliteScopeQuerySerializer(serializers.Serializer):
    site_slug = serializers.RegexField(r"^[-a-zA-Z0-9_]+$", max_length=100)
    satellite_name = serializers.CharField(max_length=100)


class ResourceClassesSerializer(serializers.Serializer):
    resource_classes = serializers.ListField(child=serializers.CharField())
    gpu_vendors = serializers.DictField(
        child=serializers.ChoiceField(choices=GpuVendor.choices),
        help_text="Each of these classes' GPU vendor as its policy declares it (a class without a policy is left "
        "out): which tools the agent reads a device's hardware with.",
    )
