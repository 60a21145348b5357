"""The failures list (`/sites/<slug>/failures/` and its CSV): failed and errored targets with
their failing rules, errors and attempts; the passes that followed failures; diagnoses and
suspects.

A target whose latest finished attempt failed is failing until an attempt passes: while its rerun
runs (the projection says `in_progress`), the list shows it with that failed attempt's verdict and
reasons, and says "rerun in progress" beside them — never "Nothing failed" instead."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime
from uuid import UUID

from django.db.models import Count, Exists, OuterRef, Q, QuerySet

from fleet.burnin.diagnosis.attempts import PassedAfter, passes_after_failures
from fleet.burnin.diagnosis.isolation import site_diagnoses
from fleet.burnin.diagnosis.outliers import OutliersPage, site_outliers_page
from fleet.burnin.models import DeviceDiagnosis, EvaluationResult, PolicyProgress, TestExecution
from fleet.inventory.models import Site
from fleet.inventory.selectors import site_by_slug
from fleet.lifecycle.models import Repair
from fleet_rules.attempts import Outcomes
from fleet_rules.evidence import RuleOutcome, rule_outcomes
from fleet_rules.readable import metric_unit, outcome_text
from fleet_rules.vocabulary import ExecutionStatus, Verdict

NOT_PASSING = (Verdict.FAILED, Verdict.ERRORED)
#: Rows being rerun whose counted attempts include a failure or an error (`Outcomes`, kept on the
#: row by reconcile): the candidates for "failing, rerun in progress".
RERUN_OF_A_FAILURE = Q(verdict=Verdict.IN_PROGRESS, outcomes__gte=Outcomes.FAILED)
SUSPECTS_SHOWN = 20
DIAGNOSES_SHOWN = 50


@dataclass(frozen=True)
class FailureFilters:
    resource_class: str | None = None
    requirement: str | None = None
    verdict: str | None = None
    satellite: str | None = None


#: How the failures list may be sorted: the key, and the columns it orders by.
FAILURE_ORDERS: dict[str, tuple[str, ...]] = {
    # The row's copy of its execution's `finished_at`, read through `burnin_prog_failing_idx`.
    "newest": ("-finished_at", "-id"),
    "oldest": ("finished_at", "id"),
    "target": ("device__hostname", "topology__label", "requirement__name", "id"),
    "requirement": ("requirement__name", "device__hostname", "topology__label", "id"),
}


@dataclass(frozen=True)
class Explained:
    """Why an execution did not pass, as the failures list says it: its failing rules (measured
    value, relation, threshold, margin) with each metric's unit, else its error (or, for a failure
    no rule explains, its evaluation's reason)."""

    rules: list[RuleOutcome]
    error: str
    units: dict[str, str]

    def text(self) -> str:
        """In one line: `busbw_gbps 377.75 GB/s is below ≥ 420 GB/s (−10.1 %); …`, else the error."""
        return "; ".join(outcome_text(o, self.units.get(o.metric, "")) for o in self.rules) or self.error


def failure_explained(execution: TestExecution, evaluation: EvaluationResult, declared: dict[str, str]) -> Explained:
    """The failures list's explanation of an execution judged by `evaluation` (`declared`: its
    requirement's metric units). The one rule: the repair queue says the same."""
    outcomes = [o for o in rule_outcomes(evaluation.metric_evaluations, execution.metrics) if not o.passed]
    # Why it could not judge (errored), or a failure no rule explains (e.g. no thresholds).
    error = execution.error or ("" if outcomes else evaluation.reason or "")
    units = {o.metric: metric_unit(execution.metrics, o.metric, declared.get(o.metric, "")) for o in outcomes}
    return Explained(outcomes, error, units)


@dataclass(frozen=True)
class FailureRow:
    row_id: int
    target: str  # hostname, or the rack's label
    device_id: UUID | None
    topology_id: UUID | None
    resource_class: str
    requirement: str
    verdict: str
    execution_id: UUID | None
    finished_at: datetime | None
    rules: list[RuleOutcome]  # the failing ones
    error: str
    attempts: int  # executions of the target under the current policy version
    units: dict[str, str]  # metric → its unit (`fleet_rules.readable.metric_unit`)
    #: A rerun of the target is running now; `verdict` and the rest are its latest finished attempt's.
    rerun_in_progress: bool = False
    topology_unit: str = ""  # rack, nvlink-domain or pod, for a topology's row


def site_failures(
    site: Site, filters: FailureFilters, *, order: str = "newest", page: int = 0, limit: int = 100
) -> tuple[list[FailureRow], bool]:
    """Failed and errored targets with their failing rules (measured value, comparator, threshold,
    margin), the error of errored runs, and their attempts; the first page starts with the failing
    targets being rerun now (four queries). Returns (rows, more)."""
    rows = _filtered(PolicyProgress.objects.filter(site=site, verdict__in=NOT_PASSING), filters)
    if filters.verdict:
        rows = rows.filter(verdict=filters.verdict)
    chosen = list(rows.order_by(*FAILURE_ORDERS[order])[page * limit : (page + 1) * limit + 1])
    more = len(chosen) > limit
    chosen = chosen[:limit]
    decided = [(p, p.execution) for p in chosen]
    if page == 0:
        decided = _reruns_of_failures(site, filters, limit) + decided
    attempts = attempts_under_current_version([(p.requirement_id, p.target_id, p.policy_version) for p, _ in decided])
    failures = []
    for p, execution in decided:
        evaluation = getattr(execution, "evaluation", None) if execution is not None else None
        explained = Explained([], "", {})
        if execution is not None and evaluation is not None:
            explained = failure_explained(execution, evaluation, p.requirement.metric_units)
        rerun = p.verdict == Verdict.IN_PROGRESS
        failures.append(
            FailureRow(
                row_id=p.id,
                target=p.device.hostname if p.device is not None else (p.topology.label if p.topology else ""),
                device_id=p.device_id,
                topology_id=p.topology_id,
                resource_class=p.resource_class,
                requirement=p.requirement.name,
                verdict=(_finished_verdict(execution) if rerun and execution is not None else None) or p.verdict,
                execution_id=execution.id if execution is not None else None,
                finished_at=execution.finished_at if execution is not None else None,
                rules=explained.rules,
                error=explained.error,
                attempts=attempts.get((p.requirement_id, p.target_id), 0),
                units=explained.units,
                rerun_in_progress=rerun,
                topology_unit=p.topology.unit if p.topology is not None else "",
            )
        )
    return failures, more


def _filtered(rows: QuerySet[PolicyProgress], filters: FailureFilters) -> QuerySet[PolicyProgress]:
    rows = rows.select_related(
        "requirement", "requirement__policy", "device", "topology", "execution", "execution__evaluation"
    )
    if filters.resource_class:
        rows = rows.filter(resource_class=filters.resource_class)
    if filters.requirement:
        rows = rows.filter(requirement__name=filters.requirement)
    if filters.satellite:
        rows = rows.filter(satellite__name=filters.satellite)
    return rows


def _reruns_of_failures(
    site: Site, filters: FailureFilters, limit: int
) -> list[tuple[PolicyProgress, TestExecution | None]]:
    """The targets being rerun whose latest finished attempt failed or errored, each with that
    attempt (two queries, at most `limit` rows): still failing until an attempt passes."""
    candidates = list(
        _filtered(PolicyProgress.objects.filter(Q(site=site) & RERUN_OF_A_FAILURE), filters).order_by(
            *FAILURE_ORDERS["target"]
        )[:limit]
    )
    if not candidates:
        return []
    finished = _latest_finished([(p.requirement_id, p.device_id, p.topology_id) for p in candidates])
    failing = []
    for p in candidates:
        execution = finished.get((p.requirement_id, p.device_id, p.topology_id))
        verdict = _finished_verdict(execution) if execution is not None else None
        if verdict in NOT_PASSING and (not filters.verdict or filters.verdict == verdict):
            failing.append((p, execution))
    return failing


def _latest_finished(targets: Sequence[tuple[UUID, UUID | None, UUID | None]]) -> dict[tuple, TestExecution]:
    """(requirement, device, topology) → its latest finished execution that counts (not a
    diagnostic run), with its evaluation (one query)."""
    executions = (
        TestExecution.objects.filter(requirement_id__in={r for r, _, _ in targets}, diagnostic=False)
        .filter(
            Q(device_id__in={d for _, d, _ in targets if d is not None})
            | Q(topology_id__in={t for _, _, t in targets if t is not None})
        )
        .exclude(status=ExecutionStatus.RUNNING)
        .select_related("evaluation")
        .order_by("requirement_id", "device_id", "topology_id", "-created_at")
        .distinct("requirement_id", "device_id", "topology_id")
    )
    return {(e.requirement_id, e.device_id, e.topology_id): e for e in executions}


def _finished_verdict(execution: TestExecution) -> str | None:
    """A finished execution's verdict as its evaluation (of its latest report) decided it; None
    while it is not evaluated yet."""
    if execution.status == ExecutionStatus.ERRORED:
        return Verdict.ERRORED
    evaluation = getattr(execution, "evaluation", None)
    if evaluation is None or evaluation.execution_updated_at != execution.updated_at:
        return None
    return Verdict.PASSED if evaluation.passed else Verdict.FAILED


def iter_site_failures(site: Site, filters: FailureFilters, *, order: str, chunk: int = 500) -> Iterator[FailureRow]:
    """Every failure, a bounded chunk of rows at a time (for the CSV download: memory stays flat)."""
    for page in range(1_000_000):
        rows, more = site_failures(site, filters, order=order, page=page, limit=chunk)
        yield from rows
        if not more:
            return


def attempts_under_current_version(targets: Sequence[tuple[UUID, UUID, int]]) -> dict[tuple[UUID, UUID], int]:
    """(requirement, target) → how many executions it had that were planned under the given
    policy version (the version a job carries in its parameters) and, on a device, ran after its
    last repair (a repaired device starts a new count), in one query."""
    if not targets:
        return {}
    wanted = {(requirement, target): version for requirement, target, version in targets}
    counts: dict[tuple[UUID, UUID], int] = defaultdict(int)
    rows = (
        TestExecution.objects.filter(requirement_id__in={r for r, _ in wanted}, diagnostic=False)
        .filter(Q(device_id__in={t for _, t in wanted}) | Q(topology_id__in={t for _, t in wanted}))
        .exclude(Exists(Repair.objects.filter(device_id=OuterRef("device_id"), created_at__gt=OuterRef("created_at"))))
        .values_list("requirement_id", "device_id", "topology_id", "job__parameters__policy_version")
        .annotate(n=Count("id"))
        .order_by()
    )
    for requirement_id, device_id, topology_id, version, n in rows:
        key = (requirement_id, device_id or topology_id)
        if key in wanted and version == wanted[key]:
            counts[key] += n
    return counts


def passed_after(site: Site, filters: FailureFilters) -> list[PassedAfter]:
    """Passes that followed failures or errors under the current version (not when the list is
    filtered to one failing verdict): two queries, or none."""
    if filters.verdict:
        return []
    return [
        r
        for r in passes_after_failures(site)
        if (not filters.resource_class or r.resource_class == filters.resource_class)
        and (not filters.requirement or r.requirement == filters.requirement)
    ]


@dataclass(frozen=True)
class FailuresPageRead:
    site: Site
    rows: list[FailureRow]
    more: bool  # another page follows
    passed_after: list[PassedAfter]
    diagnoses: list[DeviceDiagnosis]  # culprits named by isolation, newest first
    suspects: OutliersPage  # the farthest outliers


def failures_page(slug: str, filters: FailureFilters, *, order: str, page: int, limit: int) -> FailuresPageRead:
    """One page of the site's failures with what explains them (nine queries)."""
    site = site_by_slug(slug)
    rows, more = site_failures(site, filters, order=order, page=page, limit=limit)
    return FailuresPageRead(
        site=site,
        rows=rows,
        more=more,
        passed_after=passed_after(site, filters),
        diagnoses=site_diagnoses(site=site, limit=DIAGNOSES_SHOWN),
        suspects=site_outliers_page(
            site=site,
            resource_class=filters.resource_class,
            requirement=filters.requirement,
            limit=SUSPECTS_SHOWN,
            cursor=None,
        ),
    )


@dataclass(frozen=True)
class FailuresExport:
    """The failures list as the CSV streams it: every row, then the passes after failures, each
    read only as the download reaches it (a bounded chunk at a time)."""

    site: Site
    filters: FailureFilters
    order: str

    def rows(self) -> Iterator[FailureRow]:
        return iter_site_failures(self.site, self.filters, order=self.order)

    def passed_after(self) -> list[PassedAfter]:
        return passed_after(self.site, self.filters)


def failures_export(slug: str, filters: FailureFilters, *, order: str) -> FailuresExport:
    """The site (one query); the rows are read as the download streams."""
    return FailuresExport(site_by_slug(slug), filters, order)
