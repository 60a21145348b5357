"""A requirement's metrics across the site (`/sites/<slug>/metrics/<requirement>/`): for each
thresholded metric, every target's latest value, and the outliers among siblings."""

from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import dataclass
from typing import Any, NamedTuple
from uuid import UUID

from django.db.models import Q

from fleet.burnin.diagnosis.outliers import site_outlier_groups
from fleet.burnin.selectors import latest_execution_sql
from fleet.burnin.tables import sql
from fleet.core.exceptions import NotFoundError
from fleet.core.replica import read_connection
from fleet.core.statements import Statement
from fleet.inventory.models import Device, Site, Topology
from fleet.inventory.selectors import site_by_slug
from fleet.policies.models import Requirement, ThresholdRule
from fleet_rules.evidence import rule_outcomes
from fleet_rules.readable import metric_unit, unit_of_name
from fleet_rules.resolution import Rule, resolve
from fleet_rules.vocabulary import ExecutionStatus, RequirementScope


@dataclass(frozen=True)
class MetricPoint:
    target: str
    execution_id: UUID
    value: float
    passed: bool | None  # the rule's outcome in the evaluation, when evaluated


@dataclass(frozen=True)
class MetricPicture:
    resource_class: str
    requirement: str
    rule: Rule
    unit: str
    points: list[MetricPoint]


class LatestMetricsRow(NamedTuple):
    requirement_id: UUID
    label: str
    execution_id: UUID
    metrics: Any  # jsonb, as text (see `_json`)
    metric_evaluations: Any  # jsonb or null


LATEST_METRICS = Statement(
    "burnin.reads.latest_metrics",
    sql(
        """
SELECT t.requirement_id, t.label, x.id AS execution_id, x.metrics, ev.metric_evaluations
FROM unnest(%(requirements)s::uuid[], %(devices)s::uuid[], %(topologies)s::uuid[], %(labels)s::text[])
     AS t(requirement_id, device_id, topology_id, label)
CROSS JOIN LATERAL {latest} x
LEFT JOIN {evaluation} ev ON ev.execution_id = x.id
WHERE x.status = %(completed)s
""",
        latest=latest_execution_sql("t", "e.id, e.metrics, e.status"),
    ),
    LatestMetricsRow,
    example=lambda: {
        "requirements": [],
        "devices": [],
        "topologies": [],
        "labels": [],
        "completed": ExecutionStatus.COMPLETED,
    },
)


def metric_pictures(site: Site, requirement_name: str) -> list[MetricPicture]:
    """For each resource class whose policy has this requirement: every thresholded metric's latest
    value on every target at the site (four queries)."""
    requirements = list(
        Requirement.objects.filter(name=requirement_name, retired_at__isnull=True).select_related("policy")
    )
    if not requirements:
        raise NotFoundError(f"No requirement {requirement_name!r}.")
    rules = defaultdict(list)
    for t in ThresholdRule.objects.filter(requirement__in=requirements).filter(Q(site__isnull=True) | Q(site=site)):
        rules[t.requirement_id].append(Rule(t.metric, t.statistic, t.comparator, t.threshold, t.site_id))
    devices = list(
        Device.objects.filter(site=site, resource_class__in=[r.policy.resource_class for r in requirements])
        .exclude(enrolled_at__isnull=True)
        .values_list("id", "hostname", "resource_class")
    )
    topologies = list(
        Topology.objects.filter(site=site)
        .values_list("id", "unit", "label", "memberships__device__resource_class")
        .distinct()
    )
    columns: dict[str, list[Any]] = {"requirements": [], "devices": [], "topologies": [], "labels": []}
    for r in requirements:
        chosen: list[tuple[UUID | None, UUID | None, str]]
        if r.scope == RequirementScope.SINGLE_NODE:
            chosen = [(d, None, host) for d, host, rc in devices if rc == r.policy.resource_class]
        else:
            chosen = [
                (None, t, label)
                for t, unit, label, rc in topologies
                if unit == r.unit and rc == r.policy.resource_class
            ]
        for device_id, topology_id, label in chosen:
            columns["requirements"].append(r.id)
            columns["devices"].append(device_id)
            columns["topologies"].append(topology_id)
            columns["labels"].append(label)
    with read_connection().cursor() as cursor:
        latest = LATEST_METRICS.rows(cursor, columns | {"completed": ExecutionStatus.COMPLETED})
    pictures = []
    for r in requirements:
        resolved = resolve(rules[r.id], site.id)
        for rule in resolved.rules:
            metric, statistic = rule["metric"], rule["statistic"]
            points, unit = [], ""
            for row in latest:
                if row.requirement_id != r.id:
                    continue
                metrics = _json(row.metrics) or {}
                outcome = next(
                    (
                        o
                        for o in rule_outcomes(_json(row.metric_evaluations) or {}, metrics)
                        if (o.metric, o.statistic) == (metric, statistic)
                    ),
                    None,
                )
                reading = metrics.get(metric) or {}
                value = reading.get("value") if statistic is None else (reading.get("statistics") or {}).get(statistic)
                unit = unit or metric_unit(metrics, metric, r.metric_units.get(metric, ""))
                if isinstance(value, int | float) and not isinstance(value, bool):
                    points.append(
                        MetricPoint(row.label, row.execution_id, float(value), outcome.passed if outcome else None)
                    )
            unit = unit or unit_of_name(metric)
            pictures.append(
                MetricPicture(
                    r.policy.resource_class,
                    r.name,
                    Rule(metric, statistic, rule["comparator"], rule["threshold"]),
                    unit,
                    sorted(points, key=lambda p: p.value),
                )
            )
    return pictures


def _json(value: Any) -> Any:
    # Django hands jsonb to psycopg as text so JSONField can decode it; raw queries must too.
    return json.loads(value) if isinstance(value, str) else value


#: (resource class, metric, statistic) → hostname → (robust z, the k it is beyond), for the
#: outliers among siblings.
OutlierMarks = dict[tuple[str, str, str | None], dict[str, tuple[float, float]]]


@dataclass(frozen=True)
class MetricsPageRead:
    site: Site
    requirement: str
    pictures: list[MetricPicture]
    outliers: OutlierMarks


def metrics_page(slug: str, requirement: str) -> MetricsPageRead:
    """The site, the requirement's pictures (four queries; `NotFoundError` for an unknown
    requirement) and its outliers among siblings (three)."""
    site = site_by_slug(slug)
    pictures = metric_pictures(site, requirement)
    marked: OutlierMarks = {}
    for group in site_outlier_groups(site=site, requirement=requirement):
        key = (group.key.resource_class, group.key.metric, group.key.statistic)
        marked[key] = {o.hostname: (o.robust_z, group.key.k) for o in group.verdict.outliers}
    return MetricsPageRead(site, requirement, pictures, marked)
