"""Threshold resolution: a requirement's rules with one site's overrides applied → canonical JSON
→ `evaluation_source_key`.

An override replaces the default rule of the same metric and statistic; an override with no
default adds a rule; overrides of other sites are ignored. The resolved rules are a JSON array
sorted by (metric, statistic; the value rule, with a null statistic, first), each rule an object
with exactly the keys `comparator`, `metric`, `statistic` and `threshold`, canonicalised by
RFC 8785 (JSON Canonicalization Scheme: sorted keys, no whitespace, ECMAScript number formatting,
so 431 and 431.0 are the same). The key is the lowercase SHA-256 hex digest of those UTF-8 bytes.
docs/threshold-resolution.md has a worked example.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any
from uuid import UUID

from fleet_rules.canonical import canonical_json


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


def source_key(canonical: bytes) -> str:
    return hashlib.sha256(canonical).hexdigest()


def resolve(rules: Iterable[Rule], site_id: UUID | None) -> Resolution:
    """Apply `site_id`'s overrides to the default rules and derive the canonical form and key."""
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
