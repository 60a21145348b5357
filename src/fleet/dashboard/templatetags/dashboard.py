"""Template helpers: verdict signs, percentages, ages, and values as people read them (rules with
units, margins with one minus sign, parameters: `fleet_rules.readable`). Formatting only; no rule
lives here."""

from __future__ import annotations

import functools
import json
from datetime import datetime
from typing import Any
from uuid import UUID

from django import template
from django.urls import reverse
from django.utils import timezone

from fleet.dashboard.charts import metric_picture_anchor
from fleet_rules import readable
from fleet_rules.evidence import RuleOutcome
from fleet_rules.explanations import (
    DISPLAY_ORDER,
    EXCLUSION_EXPLANATIONS,
    SKIP_EXPLANATIONS,
    STATE_SIGNS,
    VERDICT_HINTS,
    VERDICT_SIGNS,
    WORKFLOW_WORDS,
)
from fleet_rules.gpu_vendors import vendor_words
from fleet_rules.remediation_ladder import OUTCOME_WORDS, STEP_NAMES
from fleet_rules.vocabulary import DeviceState, ExclusionReason, RemedyOutcome, SkipReason, Verdict, XidResolution

register = template.Library()


@register.filter
def gpu_vendor_words(vendor: str) -> str:
    """`AMD GPUs`: a class's vendor as pages name it (`fleet_rules.gpu_vendors.vendor_words`)."""
    return vendor_words(vendor)


@register.filter
def step_words(step: str) -> str:
    """`GPU reset`: a remediation ladder step as pages name it."""
    return STEP_NAMES.get(XidResolution(step), step) if step in XidResolution.values else step


@register.filter
def outcome_words(outcome: str) -> str:
    """`✓ cured`: a remediation step's outcome with its sign."""
    return OUTCOME_WORDS[RemedyOutcome(outcome)] if outcome in RemedyOutcome.values else outcome


@register.filter
def sign(verdict: str) -> str:
    """✓ ✗ ! ◷ · — a verdict readable without colour."""
    return VERDICT_SIGNS[Verdict(verdict)][0] if verdict in Verdict.values else "–"


@functools.cache
def _execution_path() -> tuple[str, str]:
    sentinel = str(UUID(int=0))
    head, _, tail = reverse("dashboard:execution", args=[sentinel]).partition(sentinel)
    return head, tail


@register.filter
def execution_href(execution_id: UUID | str) -> str:
    """The execution page's path, as `{% url 'dashboard:execution' id %}` gives it, with one
    `reverse` per process instead of one per link (a grid page links 700 cells)."""
    head, tail = _execution_path()
    return f"{head}{UUID(str(execution_id))}{tail}"


@register.filter
def verdict_word(verdict: str) -> str:
    return VERDICT_SIGNS[Verdict(verdict)][1] if verdict in Verdict.values else "no target"


@register.filter
def verdict_hint(verdict: str) -> str:
    return VERDICT_HINTS.get(Verdict(verdict), "") if verdict in Verdict.values else ""


@register.filter
def state_sign(state: str) -> str:
    """A lifecycle state as the page shows it: its symbol and word (`✗ needs repair`)."""
    if state not in DeviceState.values:
        return state
    symbol, word = STATE_SIGNS[DeviceState(state)]
    return f"{symbol} {word}"


@register.filter
def percent(part: float, whole: float | None = None) -> str:
    share = part / whole if whole else (part if whole is None else 0.0)
    return readable.percent(share)


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


@register.filter
def margin(share: float | None) -> str:
    """`−18.6 %` / `+5.0 %`: how far a value cleared or missed its threshold ("" for a rule with no
    outcome: the template hands an unresolved `outcome.margin` over as "")."""
    return readable.margin(share if isinstance(share, (int, float)) else None)


@register.filter
def number(value: Any) -> str:
    """A number with the one minus sign (U+2212)."""
    return readable.number(value)


@register.filter
def quantity(value: Any, unit: str = "") -> str:
    """`288.44 GB/s`."""
    return readable.quantity(value, unit or "")


@register.filter
def parameters(values: Any) -> list[tuple[str, str]]:
    """Parameters as (name, value with its unit) pairs for a definition list."""
    return readable.parameter_items(values if isinstance(values, dict) else None)


@register.simple_tag
def unit_of(metrics: Any, metric: str, declared: str = "") -> str:
    """A metric's unit: declared by the requirement, else reported, else named by its suffix."""
    return readable.metric_unit(metrics if isinstance(metrics, dict) else None, metric, declared)


@register.simple_tag
def rule(name: str, comparator: str | None, threshold: Any, unit: str = "") -> str:
    """`busbw_gbps ≥ 431 GB/s`."""
    return readable.rule_text(name, comparator, threshold, unit)


@register.simple_tag
def outcome(result: RuleOutcome, unit: str = "", with_margin: bool = True) -> str:
    """`busbw_gbps 288.44 GB/s is below ≥ 431 GB/s (−33.1 %)`."""
    return readable.outcome_text(result, unit, with_margin=with_margin)


@register.simple_tag
def robust_z(z: float, k: float) -> str:
    """`robust z −4.2 (beyond k = 3.5)`: the z with the k it is judged against."""
    return readable.z_text(z, k)


@register.filter
def as_json(value: Any) -> str:
    """Raw data as JSON (what the agent sent), not as a Python dict."""
    return json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False, default=str)


@register.filter
def rounded(value: float | None, digits: int = 1) -> str:
    """A number rounded for reading, with the one minus sign: `−4.2`."""
    return "—" if value is None else readable.number(round(float(value), int(digits)))


@register.filter
def workflow_words(workflow_name: str) -> str:
    """`Single-node burn-in` for `SingleNodeBurnInWorkflow`: headings in the domain's words."""
    return WORKFLOW_WORDS.get(workflow_name, workflow_name)


@register.filter
def metric_anchor(resource_class: str, metric: str) -> str:
    """The id of a metric's picture on the metrics page (`m-gpu.h200.8x-d2d_gbps.min`): where a
    failure's "on the fleet's picture" link lands."""
    return metric_picture_anchor(resource_class, metric)
