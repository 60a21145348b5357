"""Threshold resolution: (requirement, site) → resolved rules → canonical JSON → source key.

The resolved rules are the requirement's default rules with that site's overrides applied (an
override replaces the default rule of the same metric and statistic; an override with no default
adds a rule). They are rendered as a JSON array sorted by (metric, statistic; the value rule, with
a null statistic, first), each rule an object with exactly the keys `comparator`, `metric`,
`statistic` and `threshold`, canonicalised by RFC 8785 (JSON Canonicalization Scheme: sorted
keys, no whitespace, ECMAScript number formatting, so 431 and 431.0 are the same). The
`evaluation_source_key` is the lowercase SHA-256 hex digest of those UTF-8 bytes.
See docs/threshold-resolution.md for a worked example.

`resolve` is pure; `load_resolutions` reads the rules for many (requirement, site) pairs in one
query.
"""

from __future__ import annotations

import hashlib
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any
from uuid import UUID

import rfc8785


@dataclass(frozen=True)
class Rule:
    metric: str
    statistic: str | None
    comparator: str
    threshold: float | int | str
    site_id: UUID | None = None

    def as_resolved(self) -> dict[str, Any]:
        return {
            "comparator": self.comparator,
            "metric": self.metric,
            "statistic": self.statistic,
            "threshold": self.threshold,
        }


@dataclass(frozen=True)
class Resolution:
    rules: tuple[dict[str, Any], ...]
    canonical: bytes
    key: str

    @property
    def rules_list(self) -> list[dict[str, Any]]:
        return [dict(rule) for rule in self.rules]


def _order(rule: Rule) -> tuple[str, bool, str]:
    return (rule.metric, rule.statistic is not None, rule.statistic or "")


def canonical_json(value: Any) -> bytes:
    return rfc8785.dumps(value)


def source_key(canonical: bytes) -> str:
    return hashlib.sha256(canonical).hexdigest()


def resolve(rules: Iterable[Rule], site_id: UUID | None) -> Resolution:
    """Apply `site_id`'s overrides to the default rules and derive the canonical form and key.
    Overrides for other sites are ignored."""
    merged: dict[tuple[str, str | None], Rule] = {}
    overrides: dict[tuple[str, str | None], Rule] = {}
    for rule in rules:
        slot = (rule.metric, rule.statistic)
        if rule.site_id is None:
            merged[slot] = rule
        elif site_id is not None and rule.site_id == site_id:
            overrides[slot] = rule
    merged.update(overrides)
    resolved = tuple(rule.as_resolved() for rule in sorted(merged.values(), key=_order))
    canonical = canonical_json(list(resolved))
    return Resolution(rules=resolved, canonical=canonical, key=source_key(canonical))


def load_resolutions(pairs: Iterable[tuple[UUID, UUID]]) -> dict[tuple[UUID, UUID], Resolution]:
    """Resolve every distinct (requirement_id, site_id) pair with one query."""
    from fleet.policies.models import ThresholdRule

    wanted = set(pairs)
    if not wanted:
        return {}
    requirement_ids = {requirement_id for requirement_id, _ in wanted}
    site_ids = {site_id for _, site_id in wanted}
    rules_by_requirement: Mapping[UUID, list[Rule]] = defaultdict(list)
    rows = ThresholdRule.objects.filter(requirement_id__in=requirement_ids).values_list(
        "requirement_id", "metric", "statistic", "comparator", "threshold", "site_id"
    )
    for requirement_id, metric, statistic, comparator, threshold, rule_site in rows:
        if rule_site is None or rule_site in site_ids:
            rules_by_requirement[requirement_id].append(Rule(metric, statistic, comparator, threshold, rule_site))
    return {
        (requirement_id, site_id): resolve(rules_by_requirement.get(requirement_id, []), site_id)
        for requirement_id, site_id in wanted
    }
