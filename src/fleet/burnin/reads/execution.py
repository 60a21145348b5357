"""The evidence of one execution (`/executions/<uuid>/`): its evaluation rule by rule against
the thresholds that resolve for it now."""

from __future__ import annotations

from dataclasses import dataclass
from uuid import UUID

from django.db.models import Q

from fleet.burnin.models import TestExecution
from fleet.core.exceptions import NotFoundError
from fleet.inventory.models import Site
from fleet.policies.models import ThresholdRule
from fleet_rules.evidence import RuleOutcome, rule_outcomes
from fleet_rules.health_evidence import HealthRead, health_read
from fleet_rules.readable import metric_unit, outcome_text
from fleet_rules.resolution import Resolution, Rule, resolve


@dataclass(frozen=True)
class EvidenceRule:
    outcome: RuleOutcome | None  # None: the rule was not in the evaluation (e.g. evaluated under older thresholds)
    rule: Rule  # the resolved rule it is judged against now
    site_override: bool
    unit: str = ""  # the metric's unit (`fleet_rules.readable.metric_unit`)

    @property
    def name(self) -> str:
        return f"{self.rule.metric}.{self.rule.statistic}" if self.rule.statistic else self.rule.metric


@dataclass(frozen=True)
class ExecutionEvidence:
    execution: TestExecution
    resolution: Resolution
    rules: list[EvidenceRule]
    extra_outcomes: list[RuleOutcome]  # in the evaluation, but no longer in the resolution
    policy_version: int
    evaluation_is_current: bool

    @property
    def health(self) -> HealthRead | None:
        """The window's health evidence (Xid events, ECC counters, throttle reasons), if reported."""
        return health_read(self.execution.health)

    @property
    def target(self) -> str:
        """The hostname, or the topology's label: the point's name on the metric picture."""
        e = self.execution
        return e.device.hostname if e.device else (e.topology.label if e.topology else "")

    def unit_of(self, metric: str) -> str:
        declared = self.execution.requirement.metric_units.get(metric, "")
        return metric_unit(self.execution.metrics, metric, declared)

    @property
    def reasons(self) -> list[str]:
        """Why it failed, rule by rule in the same words as everywhere
        (`busbw_gbps 288.44 GB/s is below ≥ 431 GB/s`); the stored reason when no rule explains it
        (an errored run, no thresholds)."""
        failing = [
            outcome_text(r.outcome, r.unit, with_margin=False)
            for r in self.rules
            if r.outcome is not None and not r.outcome.passed
        ]
        failing += [
            outcome_text(o, self.unit_of(o.metric), with_margin=False) for o in self.extra_outcomes if not o.passed
        ]
        evaluation = getattr(self.execution, "evaluation", None)
        if failing:
            return failing
        return [evaluation.reason] if evaluation is not None and evaluation.reason else []


def execution_evidence(execution_id: UUID) -> ExecutionEvidence:
    """An execution with its evaluation, rule by rule against the resolved thresholds (two queries)."""
    execution = (
        TestExecution.objects.select_related(
            "requirement", "requirement__policy", "device", "topology", "site", "evaluation", "job"
        )
        .filter(id=execution_id)
        .first()
    )
    if execution is None:
        raise NotFoundError(f"No execution {execution_id}.")
    rules = [
        Rule(t.metric, t.statistic, t.comparator, t.threshold, t.site_id)
        for t in ThresholdRule.objects.filter(requirement_id=execution.requirement_id).filter(
            Q(site__isnull=True) | Q(site_id=execution.site_id)
        )
    ]
    resolution = resolve(rules, execution.site_id)
    overridden = {(r.metric, r.statistic) for r in rules if r.site_id is not None}
    evaluation = getattr(execution, "evaluation", None)
    outcomes = {
        (o.metric, o.statistic): o
        for o in (rule_outcomes(evaluation.metric_evaluations, execution.metrics) if evaluation else [])
    }
    resolved = [Rule(r["metric"], r["statistic"], r["comparator"], r["threshold"]) for r in resolution.rules]
    evidence_rules = [
        EvidenceRule(
            outcomes.pop((r.metric, r.statistic), None),
            r,
            (r.metric, r.statistic) in overridden,
            metric_unit(execution.metrics, r.metric, execution.requirement.metric_units.get(r.metric, "")),
        )
        for r in resolved
    ]
    current = evaluation is not None and (
        evaluation.evaluation_source_key == resolution.key and evaluation.execution_updated_at == execution.updated_at
    )
    return ExecutionEvidence(
        execution, resolution, evidence_rules, list(outcomes.values()), execution.requirement.policy.version, current
    )


@dataclass(frozen=True)
class ExecutionPageRead:
    evidence: ExecutionEvidence
    site: Site  # the execution's


def execution_page(execution_id: UUID) -> ExecutionPageRead:
    """The execution's evidence (two queries; `NotFoundError` when unknown)."""
    evidence = execution_evidence(execution_id)
    return ExecutionPageRead(evidence, evidence.execution.site)
