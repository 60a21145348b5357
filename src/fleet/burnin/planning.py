"""Rerun planning: pure decisions over loaded data (see `rerun_dispatch` for load and write)."""

from __future__ import annotations

from django.db import models


class PlanningMode(models.TextChoices):
    NON_PASSING = "non_passing", "NON_PASSING"
    ALL = "all", "ALL"


class SkipReason(models.TextChoices):
    PROJECTION_PENDING = "projection_pending", "PROJECTION_PENDING"
    ALREADY_SATISFIED = "already_satisfied", "ALREADY_SATISFIED"
    NO_POLICY_SATISFYING_PARAMETER_SOURCE = (
        "no_policy_satisfying_parameter_source",
        "NO_POLICY_SATISFYING_PARAMETER_SOURCE",
    )
    POLICY_CHANGED = "policy_changed", "POLICY_CHANGED"
    WORKFLOW_UNAVAILABLE = "workflow_unavailable", "WORKFLOW_UNAVAILABLE"
    DEVICE_INELIGIBLE = "device_ineligible", "DEVICE_INELIGIBLE"
    DEVICE_CONTENDED = "device_contended", "DEVICE_CONTENDED"
    ALREADY_DISPATCHED = "already_dispatched", "ALREADY_DISPATCHED"
    TOPOLOGY_COHORT_BLOCKED = "topology_cohort_blocked", "TOPOLOGY_COHORT_BLOCKED"


class ExclusionReason(models.TextChoices):
    NO_ACCEPTANCE_POLICY = "no_acceptance_policy", "NO_ACCEPTANCE_POLICY"
    NO_SINGLE_NODE_REQUIREMENTS = "no_single_node_requirements", "NO_SINGLE_NODE_REQUIREMENTS"
    NO_RERUN_REQUIREMENTS = "no_rerun_requirements", "NO_RERUN_REQUIREMENTS"
