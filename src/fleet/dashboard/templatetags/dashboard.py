"""Template helpers: verdict signs, percentages, ages. Formatting only; no rule lives here."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django import template
from django.utils import timezone

from fleet_rules.explanations import DISPLAY_ORDER, EXCLUSION_EXPLANATIONS, SKIP_EXPLANATIONS, VERDICT_SIGNS
from fleet_rules.vocabulary import ExclusionReason, SkipReason, Verdict

register = template.Library()


@register.filter
def sign(verdict: str) -> str:
    """✓ ✗ ! ◷ · — a verdict readable without colour."""
    return VERDICT_SIGNS[Verdict(verdict)][0] if verdict in Verdict.values else "–"


@register.filter
def verdict_word(verdict: str) -> str:
    return VERDICT_SIGNS[Verdict(verdict)][1] if verdict in Verdict.values else "no target"


@register.filter
def percent(part: float, whole: float | None = None) -> str:
    share = part / whole if whole else (part if whole is None else 0.0)
    return f"{share * 100:.1f} %"


@register.filter
def ago(moment: datetime | None) -> str:
    if moment is None:
        return "never"
    seconds = int((timezone.now() - moment).total_seconds())
    if seconds < 90:
        return f"{seconds} s ago"
    if seconds < 5400:
        return f"{seconds // 60} min ago"
    if seconds < 172800:
        return f"{seconds // 3600} h ago"
    return f"{seconds // 86400} days ago"


@register.filter
def silent(moment: datetime | None, limit_s: int = 300) -> bool:
    """A satellite not heard from for more than `limit_s` seconds (five minutes by default)."""
    return moment is None or (timezone.now() - moment).total_seconds() > limit_s


@register.filter
def explain_skip(reason: str) -> str:
    return SKIP_EXPLANATIONS.get(SkipReason(reason), reason) if reason in SkipReason.values else reason


@register.filter
def explain_exclusion(reason: str) -> str:
    return EXCLUSION_EXPLANATIONS.get(ExclusionReason(reason), reason) if reason in ExclusionReason.values else reason


@register.filter
def get(mapping: dict[Any, Any], key: Any) -> Any:
    return mapping.get(key) if isinstance(mapping, dict) else None


@register.simple_tag
def verdict_order() -> list[str]:
    """Verdicts in the order columns and bars show them."""
    return [v.value for v in DISPLAY_ORDER]


@register.filter
def not_passing(verdict: str) -> bool:
    """Failed or errored: what the failures page lists and a rerun is for."""
    return verdict in (Verdict.FAILED, Verdict.ERRORED)


@register.filter
def names(device_ids: Any, hostnames: dict[Any, str]) -> str:
    """Device ids as their hostnames, sorted, comma-separated."""
    return ", ".join(sorted(hostnames.get(d, str(d)) for d in device_ids))


@register.filter
def duration(seconds: float | None) -> str:
    """A span for people: `45 s`, `12 min`, `5.2 h`, `3.1 days` (— when there is none)."""
    if seconds is None:
        return "—"
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min"
    if seconds < 172800:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 86400:.1f} days"
