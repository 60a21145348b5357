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
import json
from collections.abc import Iterable
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


#: Integers JSON numbers (IEEE doubles) hold exactly; RFC 8785 refuses the others.
_SAFE_INTEGER = 2**53 - 1
#: Below this magnitude Python writes a fraction with an exponent (1e-05), ECMAScript without.
_FIXED_FROM = 1e-4


class _NotPlain(Exception):
    """The value holds something json.dumps would write differently from RFC 8785."""


def _plain(value: Any) -> Any:
    """`value` as json.dumps writes it byte for byte as RFC 8785 does: a float with an integral
    value below 2**53 becomes that int (JCS writes 431.0 as 431); anything whose form could differ
    (a fraction below 1e-4, a float beyond 2**53, NaN, an unsafe integer, a key that is not a
    string or orders differently in UTF-16, a type JCS does not know) raises `_NotPlain`."""
    kind = type(value)
    if kind is str or value is None or kind is bool:
        return value
    if kind is int:
        if -_SAFE_INTEGER <= value <= _SAFE_INTEGER:
            return value
        raise _NotPlain
    if kind is float:
        if value.is_integer() and -_SAFE_INTEGER <= value <= _SAFE_INTEGER:
            return int(value)
        if _FIXED_FROM <= abs(value) < _SAFE_INTEGER:  # not integral, so NaN and infinities fail
            return value
        raise _NotPlain
    if kind is dict:
        plain = {}
        for key, item in value.items():
            # Python sorts keys by code point, RFC 8785 by UTF-16 unit: they differ past U+FFFF.
            if type(key) is not str or not (key.isascii() or max(key) <= "\uffff"):
                raise _NotPlain
            plain[key] = _plain(item)
        return plain
    if kind is list or kind is tuple:
        return [_plain(item) for item in value]
    raise _NotPlain  # enums and other subclasses: RFC 8785 decides


def canonical_json(value: Any) -> bytes:
    """RFC 8785 bytes of `value`. The C encoder writes them when `_plain` finds nothing it would
    write differently (4× faster on a certificate's document, profiled: certificates are
    canonicalised on every reconcile page that issues them); otherwise `rfc8785` does, as it
    also does for what it refuses. tests/rules/test_resolution.py holds the two equal."""
    try:
        plain = _plain(value)
        return json.dumps(plain, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode()
    except (_NotPlain, UnicodeEncodeError):
        return rfc8785.dumps(value)


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
