"""Outliers at a site: each group's size, median and MAD aggregated in the database, with the
samples that may lie beyond `k`, in a fixed number of queries; decided in `fleet_rules.outliers`,
then sorted and paged.

A sample is a device's latest *passing* evidence for a single-node requirement: the execution
behind its `passed` projection row at the policy's current version, and the value each resolved
threshold rule of the requirement compares. Groups are (resource class, requirement, metric,
statistic) at the site. Neither the number of queries nor the memory depends on the fleet's
size: only the groups and their candidates reach Python, never every sample.
"""

from __future__ import annotations

import hashlib
from collections import defaultdict
from dataclasses import dataclass
from decimal import Decimal
from typing import Any, NamedTuple
from uuid import UUID, uuid4

from django.conf import settings
from django.core.cache import caches
from django.core.exceptions import ValidationError
from django.db import connection

from fleet.burnin.tables import sql
from fleet.core.cursors import cursor_decode, cursor_encode
from fleet.core.statements import Statement
from fleet.inventory.models import Site
from fleet.policies.models import Requirement
from fleet.policies.selectors import load_resolutions
from fleet_rules.outliers import CONSISTENCY, DEFAULT_K, DEFAULT_MIN_GROUP, GroupVerdict, Sample, judge_group
from fleet_rules.vocabulary import OutlierGroupReason, RequirementScope, Verdict


class GroupRow(NamedTuple):
    """A group's figures (kind 0: size, median, MAD) or one of its candidates (kind 1: device,
    hostname, value); `n` is the group's rule, by ordinal."""

    kind: int
    n: int
    size: int | None
    median: float | None
    mad: float | None
    device_id: UUID | None
    hostname: str | None
    value: float | None
    mark_rows: int | None  # kind 2: the evidence mark, how many passed rows the site has
    mark_sum: Decimal | None  # kind 2: and the sum of a hash of each one's execution and version


# Groups (kind 0: size, median, MAD) and candidates (kind 1: the samples whose robust z-score
# is beyond the group's k on either side; the rule decides which side counts) in one statement.
GROUPS = Statement(
    "burnin.diagnosis.outlier_groups",
    sql(
        """
WITH mark AS MATERIALIZED (
    SELECT count(*) AS mark_rows, sum(uuid_hash_extended(p.execution_id, p.policy_version)) AS mark_sum
    FROM {progress} p WHERE p.site_id = %(site)s AND p.verdict = %(passed)s
), samples AS MATERIALIZED (
    SELECT rule.n, rule.k, p.device_id, d.hostname, v.value
    FROM unnest(%(requirements)s::uuid[], %(metrics)s::text[], %(statistics)s::text[], %(ordinals)s::int[],
                %(versions)s::int[], %(ks)s::float8[]) AS rule(requirement_id, metric, statistic, n, version, k)
    JOIN {progress} p ON p.requirement_id = rule.requirement_id AND p.site_id = %(site)s
         AND p.device_id IS NOT NULL AND p.verdict = %(passed)s AND p.policy_version = rule.version
    JOIN {execution} x ON x.id = p.execution_id
    JOIN {device} d ON d.id = p.device_id
    CROSS JOIN LATERAL (
        SELECT CASE WHEN jsonb_typeof(j.value) = 'number' THEN (j.value)::text::float8 END AS value
        FROM (SELECT CASE WHEN rule.statistic IS NULL THEN x.metrics -> rule.metric -> 'value'
                          ELSE x.metrics -> rule.metric -> 'statistics' -> rule.statistic END AS value) j
    ) v
    WHERE v.value IS NOT NULL AND v.value NOT IN ('NaN'::float8, 'Infinity'::float8, '-Infinity'::float8)
      AND NOT EXISTS (SELECT 1 FROM mark WHERE mark.mark_rows = %(known_rows)s::bigint
                      AND mark.mark_sum IS NOT DISTINCT FROM %(known_sum)s::numeric)
), centre AS (
    SELECT n, count(*) AS size, percentile_cont(0.5) WITHIN GROUP (ORDER BY value) AS median
    FROM samples GROUP BY n
), spread AS (
    SELECT s.n, percentile_cont(0.5) WITHIN GROUP (ORDER BY abs(s.value - c.median)) AS mad
    FROM samples s JOIN centre c USING (n) GROUP BY s.n
)
SELECT 0 AS kind, c.n, c.size, c.median, sp.mad, NULL::uuid AS device_id, NULL::text AS hostname,
       NULL::float8 AS value, NULL::bigint AS mark_rows, NULL::numeric AS mark_sum
FROM centre c JOIN spread sp USING (n)
UNION ALL
SELECT 1, s.n, NULL, NULL, NULL, s.device_id, s.hostname, s.value, NULL, NULL
FROM samples s JOIN centre c USING (n) JOIN spread sp USING (n)
WHERE c.size >= %(min_group)s AND sp.mad > 0 AND abs(s.value - c.median) * %(consistency)s / sp.mad > s.k
UNION ALL
SELECT 2, 0, NULL, NULL, NULL, NULL, NULL, NULL, mark.mark_rows, mark.mark_sum FROM mark
ORDER BY 1, 2, 7
"""
    ),
    GroupRow,
    example=lambda: {
        "requirements": [uuid4(), uuid4()],
        "metrics": ["throughput", "latency"],
        "statistics": [None, "p99"],
        "ordinals": [1, 2],
        "versions": [1, 1],
        "site": uuid4(),
        "passed": Verdict.PASSED,
        "ks": [DEFAULT_K, DEFAULT_K],
        "min_group": DEFAULT_MIN_GROUP,
        "consistency": CONSISTENCY,
        "known_rows": -1,
        "known_sum": None,
    },
)


@dataclass(frozen=True)
class GroupKey:
    resource_class: str
    requirement_id: UUID
    requirement: str
    metric: str
    statistic: str | None
    comparator: str
    k: float


@dataclass(frozen=True)
class Group:
    key: GroupKey
    verdict: GroupVerdict
    min_group: int

    @property
    def outlier_count(self) -> int:
        return len(self.verdict.outliers)

    @property
    def explanation(self) -> str | None:
        """Why the group names no outlier, in words."""
        reason, v = self.verdict.reason, self.verdict
        if reason is None:
            return None
        if reason == OutlierGroupReason.TOO_FEW_DEVICES:
            return f"{v.size} device(s) with a passing sample; outliers need at least {self.min_group}"
        if reason == OutlierGroupReason.MAD_ZERO:
            return "at least half the devices measured the same value (MAD 0): no spread to compare with"
        if reason == OutlierGroupReason.NO_BAD_SIDE:
            return "an eq rule has no worse side"
        return f"no device beyond robust z {self.key.k:g} on the bad side"


@dataclass(frozen=True)
class OutlierItem:
    device_id: UUID
    hostname: str
    resource_class: str
    requirement: str
    metric: str
    statistic: str | None
    value: float
    median: float
    mad: float
    robust_z: float
    k: float


@dataclass(frozen=True)
class OutliersPage:
    items: list[OutlierItem]
    next_cursor: str | None
    groups: list[Group]  # every group looked at, with why it names none when it does not

    @property
    def total(self) -> int:
        return sum(len(g.verdict.outliers) for g in self.groups)


def min_group_size() -> int:
    return int(getattr(settings, "FLEET_OUTLIER_MIN_GROUP", DEFAULT_MIN_GROUP))


def _group_rows(params: dict[str, Any]) -> list[GroupRow]:
    """The groups' figures and candidates (kinds 0 and 1), exact for the evidence now committed.

    The statement also returns the site's evidence mark (kind 2): how many passed projection rows
    the site has and the sum of a 64-bit hash of each one's deciding execution and policy version,
    read from the (site, verdict) index alone. The samples are a function of exactly those rows,
    so figures computed at the same mark for the same groups are still the truth (short of a hash
    collision): this process keeps the last ones per (site, groups) and sends their mark; when it
    has not moved, the statement reads the index range instead of every sample (3.4 s at 100,000
    devices). One statement either way: the page's query count does not depend on what was kept."""
    key = "outlier-groups:" + hashlib.sha256(repr(sorted(params.items())).encode()).hexdigest()
    kept: tuple[int, Decimal | None, list[GroupRow]] | None = caches["default"].get(key)
    known_rows, known_sum = (kept[0], kept[1]) if kept else (-1, None)
    with connection.cursor() as cursor:
        rows = GROUPS.rows(cursor, {**params, "known_rows": known_rows, "known_sum": known_sum})
    mark = next(row for row in rows if row.kind == 2)
    assert mark.mark_rows is not None
    if kept is not None and (mark.mark_rows, mark.mark_sum) == (known_rows, known_sum):
        return kept[2]
    figures = [row for row in rows if row.kind != 2]
    caches["default"].set(key, (mark.mark_rows, mark.mark_sum, figures), timeout=None)
    return figures


def site_outlier_groups(
    *, site: Site, resource_class: str | None = None, requirement: str | None = None
) -> list[Group]:
    """Every (resource class, requirement, metric, statistic) group at the site, decided. Three
    queries whatever the fleet's size: requirements, their resolved rules, the samples."""
    requirements = list(
        Requirement.objects.select_related("policy")
        .filter(scope=RequirementScope.SINGLE_NODE, retired_at__isnull=True)
        .order_by("policy__resource_class", "name")
    )
    if resource_class:
        requirements = [r for r in requirements if r.policy.resource_class == resource_class]
    if requirement:
        requirements = [r for r in requirements if r.name == requirement]
    resolutions = load_resolutions((r.id, site.id) for r in requirements)
    keys: list[GroupKey] = []
    versions: list[int] = []
    for r in requirements:
        for rule in resolutions[(r.id, site.id)].rules:
            if isinstance(rule["threshold"], str):
                continue  # a string rule has no distance to measure
            keys.append(
                GroupKey(
                    r.policy.resource_class,
                    r.id,
                    r.name,
                    rule["metric"],
                    rule.get("statistic"),
                    rule["comparator"],
                    r.outlier_k if r.outlier_k is not None else DEFAULT_K,
                )
            )
            versions.append(r.policy.version)
    minimum = min_group_size()
    stats: dict[int, tuple[int, float, float]] = {}
    candidates: dict[int, list[Sample]] = defaultdict(list)
    if keys:
        params = {
            "requirements": [k.requirement_id for k in keys],
            "metrics": [k.metric for k in keys],
            "statistics": [k.statistic for k in keys],
            "ordinals": list(range(1, len(keys) + 1)),
            "versions": versions,
            "site": site.id,
            "passed": Verdict.PASSED,
            "ks": [k.k for k in keys],
            "min_group": max(minimum, 1),
            "consistency": CONSISTENCY,
        }
        for row in _group_rows(params):
            # Each kind's own columns are never null (a group's aggregates over at least one
            # sample; a candidate's device, hostname and value); the other kind's are.
            if row.kind == 0:
                assert row.size is not None and row.median is not None and row.mad is not None
                stats[row.n] = (row.size, row.median, row.mad)
            else:
                assert row.device_id is not None and row.hostname is not None and row.value is not None
                candidates[row.n].append(Sample(row.device_id, row.hostname, row.value))
    groups = []
    for n, key in enumerate(keys, start=1):
        size, centre, spread = stats.get(n, (0, None, None))
        verdict = judge_group(
            size, centre, spread, candidates[n], comparator=key.comparator, k=key.k, min_group=minimum
        )
        groups.append(Group(key, verdict, minimum))
    return groups


CURSOR_PURPOSE = "outliers"


def site_outliers_page(
    *,
    site: Site,
    resource_class: str | None,
    requirement: str | None,
    limit: int,
    cursor: str | None,
) -> OutliersPage:
    """The site's outliers, farthest out first (then by hostname), `limit` at a time."""
    offset = 0
    scope = [str(site.id), resource_class or "", requirement or ""]
    if cursor:
        payload = cursor_decode(cursor, purpose=CURSOR_PURPOSE)
        if payload.get("s") != scope or not isinstance(payload.get("o"), int) or payload["o"] < 0:
            raise ValidationError({"cursor": ["The cursor belongs to another query."]})
        offset = payload["o"]
    groups = site_outlier_groups(site=site, resource_class=resource_class, requirement=requirement)
    items = [
        OutlierItem(
            o.device_id,
            o.hostname,
            g.key.resource_class,
            g.key.requirement,
            g.key.metric,
            g.key.statistic,
            o.value,
            g.verdict.median or 0.0,
            g.verdict.mad or 0.0,
            o.robust_z,
            g.key.k,
        )
        for g in groups
        for o in g.verdict.outliers
    ]
    items.sort(key=lambda i: (-abs(i.robust_z), i.hostname, i.requirement, i.metric, i.statistic or ""))
    page = items[offset : offset + limit]
    more = offset + limit < len(items)
    return OutliersPage(
        items=page,
        next_cursor=cursor_encode({"s": scope, "o": offset + limit}, purpose=CURSOR_PURPOSE) if more else None,
        groups=groups,
    )


def device_outliers(groups: list[Group], device_id: UUID) -> list[tuple[Group, float]]:
    """The groups in which one device is an outlier, with its robust z-score there."""
    return [(g, o.robust_z) for g in groups for o in g.verdict.outliers if o.device_id == device_id]


__all__ = ["OutlierGroupReason", "site_outlier_groups", "site_outliers_page"]
