"""Acceptance policies: what a device of a resource class must pass, and how it is measured."""

from __future__ import annotations

from datetime import timedelta

from django.db import models
from django.db.models import CharField, F, Func, Q
from django.db.models.lookups import In

from fleet.core.models import TimeStamped, choices_check, new_uuid
from fleet_rules.gpu_vendors import DEFAULT_GPU_VENDOR
from fleet_rules.lifecycle import BREAKER_SHARE, BREAKER_WINDOW, REPAIR_AFTER_FAILURES
from fleet_rules.vocabulary import RACK_ACCEPTANCE, Comparator, GpuVendor, RequirementScope, TopologyUnit

GATE_PATTERN = r"^[a-z0-9][a-z0-9._-]*$"
#: A requirement may demand at most this many consecutive passes (each is a full rerun).
MAX_CONSECUTIVE_PASSES = 10


class AcceptancePolicy(TimeStamped):
    """The policy for one resource class. `version` rises once per change set to its
    requirements, thresholds or parameter constraints (see `policies.services`)."""

    id = models.UUIDField(primary_key=True, default=new_uuid, editable=False)
    resource_class = models.CharField(max_length=255, unique=True)
    description = models.TextField(blank=True, default="")
    gpu_vendor = models.CharField(
        max_length=16,
        choices=GpuVendor.choices,
        default=DEFAULT_GPU_VENDOR,
        help_text="Who made the class's GPUs: which vendor's tests its requirements name (fleet_rules.gpu_vendors).",
    )
    version = models.PositiveIntegerField(default=1)
    version_changed_at = models.DateTimeField(
        null=True,
        blank=True,
        help_text="When `version` last rose (null: never since it was created). Executions created since "
        "then are the attempts under the current version.",
    )
    # The lifecycle settings (fleet_rules.lifecycle): what the verdict does to a device.
    auto_accept = models.BooleanField(
        default=True, help_text="Move a device to accepted when its certificate is issued (false: an operator accepts)."
    )
    repair_after_failures = models.PositiveSmallIntegerField(
        default=REPAIR_AFTER_FAILURES,
        help_text="Failures of one target since the device's last repair that send it to needs_repair (0: never).",
    )
    breaker_share = models.FloatField(
        default=BREAKER_SHARE,
        help_text="Share of a site's enrolled devices of this class that may go to repair automatically within "
        "breaker_window before the circuit breaker holds the rest.",
    )
    breaker_window = models.DurationField(default=BREAKER_WINDOW)

    class Meta:
        ordering = ["resource_class"]
        verbose_name_plural = "acceptance policies"
        constraints = [
            models.CheckConstraint(condition=Q(version__gte=1), name="policies_policy_version_positive"),
            choices_check("gpu_vendor", GpuVendor, "policies_policy_gpu_vendor_valid"),
            models.CheckConstraint(
                condition=Q(breaker_share__gt=0, breaker_share__lte=1), name="policies_policy_breaker_share_range"
            ),
            models.CheckConstraint(
                condition=Q(breaker_window__gt=timedelta(0)), name="policies_policy_breaker_window_positive"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.resource_class} v{self.version}"


class Requirement(TimeStamped):
    """One test a device (single-node) or a topology (multi-node) must pass."""

    id = models.UUIDField(primary_key=True, default=new_uuid, editable=False)
    policy = models.ForeignKey(AcceptancePolicy, on_delete=models.CASCADE, related_name="requirements")
    name = models.CharField(max_length=100)
    gate = models.CharField(max_length=64)
    scope = models.CharField(max_length=16, choices=RequirementScope.choices)
    unit = models.CharField(
        max_length=32, choices=TopologyUnit.choices, null=True, blank=True, help_text="Multi-node only."
    )
    test = models.CharField(max_length=100, help_text="The test whose executions judge this requirement.")
    rerunnable = models.BooleanField(default=True)
    parameter_constraints = models.JSONField(default=dict, blank=True, help_text='e.g. {"duration_s": {"gte": 3600}}')
    retired_at = models.DateTimeField(
        null=True, blank=True, help_text="A retired requirement governs nothing; its projection rows go."
    )
    consecutive_passes = models.PositiveSmallIntegerField(
        default=1, help_text="Passed only when the target's latest this many finished executions all passed."
    )
    outlier_k = models.FloatField(
        null=True, blank=True, help_text="Robust z-score beyond which a sibling is an outlier (null: 3.5)."
    )
    evidence_valid_for = models.DurationField(
        null=True,
        blank=True,
        help_text="How long a pass counts after its execution finished (the fleet file's `30d`); null: forever. "
        "An older pass is verdict `expired`.",
    )
    metric_units = models.JSONField(
        default=dict,
        blank=True,
        help_text='The unit of each metric, for people (`{"busbw_gbps": "GB/s"}`); judges nothing.',
    )

    class Meta:
        ordering = ["policy__resource_class", "name"]
        constraints = [
            models.UniqueConstraint(fields=["policy", "name"], name="policies_requirement_unique_name"),
            models.CheckConstraint(condition=Q(gate__regex=GATE_PATTERN), name="policies_requirement_gate_format"),
            choices_check("scope", RequirementScope, "policies_requirement_scope_valid"),
            models.CheckConstraint(
                condition=(
                    Q(scope=RequirementScope.MULTI_NODE, unit__isnull=False, gate=RACK_ACCEPTANCE)
                    | (Q(scope=RequirementScope.SINGLE_NODE, unit__isnull=True) & ~Q(gate=RACK_ACCEPTANCE))
                ),
                name="policies_requirement_multi_node_iff_unit_iff_rack_acceptance",
            ),
            models.CheckConstraint(
                condition=Q(consecutive_passes__gte=1, consecutive_passes__lte=MAX_CONSECUTIVE_PASSES),
                name="policies_requirement_consecutive_passes_range",
            ),
            models.CheckConstraint(
                condition=Q(outlier_k__isnull=True) | Q(outlier_k__gt=0), name="policies_requirement_outlier_k_positive"
            ),
        ]
        indexes = [models.Index(fields=["policy", "gate"], name="policies_requirement_gate_idx")]

    def __str__(self) -> str:
        return self.name


def _jsonb_type(field: str) -> Func:
    return Func(F(field), function="jsonb_typeof", output_field=CharField())


class ThresholdRule(TimeStamped):
    """`metric` (or one of its statistics) compared with a threshold; a rule with a `site` is
    that site's override of the default rule for the same metric and statistic."""

    id = models.UUIDField(primary_key=True, default=new_uuid, editable=False)
    requirement = models.ForeignKey(Requirement, on_delete=models.CASCADE, related_name="thresholds")
    metric = models.CharField(max_length=100)
    statistic = models.CharField(
        max_length=32, null=True, blank=True, help_text="Null compares the metric's value; else e.g. min, p99."
    )
    comparator = models.CharField(max_length=8, choices=Comparator.choices)
    threshold = models.JSONField(help_text="A number, or a string (string thresholds only with eq).")
    site = models.ForeignKey(
        "inventory.Site", on_delete=models.CASCADE, null=True, blank=True, related_name="threshold_overrides"
    )

    class Meta:
        ordering = ["requirement", "metric", "statistic"]
        constraints = [
            models.UniqueConstraint(
                fields=["requirement", "metric", "statistic", "site"],
                nulls_distinct=False,
                name="policies_threshold_unique_rule",
            ),
            choices_check("comparator", Comparator, "policies_threshold_comparator_valid"),
            models.CheckConstraint(
                condition=Q(statistic__isnull=True) | ~Q(statistic=""), name="policies_threshold_statistic_not_blank"
            ),
            models.CheckConstraint(
                condition=In(_jsonb_type("threshold"), ["number", "string"]),
                name="policies_threshold_number_or_string",
            ),
            models.CheckConstraint(
                condition=Q(comparator=Comparator.EQ) | Q(In(_jsonb_type("threshold"), ["number"])),
                name="policies_threshold_string_only_with_eq",
            ),
        ]

    def __str__(self) -> str:
        target = f"{self.metric}.{self.statistic}" if self.statistic else self.metric
        return f"{target} {self.comparator} {self.threshold}"


class ParameterProfile(TimeStamped):
    """Parameters a (re)run of `test` on `resource_class` may use; planning takes the newest one
    that satisfies the requirement's parameter constraints."""

    id = models.UUIDField(primary_key=True, default=new_uuid, editable=False)
    resource_class = models.CharField(max_length=255)
    test = models.CharField(max_length=100)
    name = models.CharField(max_length=100, default="default")
    parameters = models.JSONField(default=dict, blank=True)

    class Meta:
        ordering = ["resource_class", "test", "-created_at"]
        constraints = [
            models.UniqueConstraint(
                fields=["resource_class", "test", "name"], name="policies_parameter_profile_unique"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.resource_class}/{self.test}/{self.name}"
