"""`fleet apply -f CANDIDATE.yaml --what-if`: which targets a candidate fleet file's thresholds
would flip, and how many certificates that would supersede. Writes nothing.

Every current target whose deciding evidence an evaluation judged (`passed`/`failed`) under a
requirement whose rules the candidate changes is replayed with the agent's evaluator
(`fleet_rules.whatif.replay`). Evidence is read in keyset pages of `PAGE` rows, two statements a
page (the rows with their executions and evaluations; the current certificates of the devices
whose targets would stop passing), so memory and queries per page are flat whatever the fleet.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any, NamedTuple
from uuid import UUID, uuid4

from django.db import connection
from django.db.models import Count

from fleet.autopilot.services import autopilot_changes
from fleet.burnin.models import AcceptanceCertificate
from fleet.burnin.tables import sql
from fleet.core.statements import Statement
from fleet.fleetfile.autopilot import autopilot_fields
from fleet.fleetfile.document import FleetDocument
from fleet.fleetfile.durations import duration_text
from fleet.inventory.models import Device, Site
from fleet.policies.models import AcceptancePolicy, Requirement, ThresholdRule
from fleet_rules.canonical import canonical_json
from fleet_rules.lifecycle import BREAKER_MINIMUM, BREAKER_SHARE, breaker_limit
from fleet_rules.readable import metric_unit, outcome_text
from fleet_rules.resolution import Rule, resolve
from fleet_rules.vocabulary import DeviceState, Verdict
from fleet_rules.whatif import REPLAYABLE, Flip, replay, rule_json

PAGE = 500


class EvidenceRow(NamedTuple):
    """A projection row to replay, with its deciding execution and that execution's evaluation."""

    id: int
    verdict: str
    requirement_id: UUID
    site_id: UUID
    slug: str  # the site's
    resource_class: str
    target: str  # the device's hostname or the topology's label
    device_id: UUID | None
    topology_id: UUID | None
    status: str
    metrics: Any  # jsonb: text from Django's psycopg set-up (`_json`)
    metric_evaluations: Any  # jsonb, or null without an evaluation


EVIDENCE = Statement(
    "fleetfile.whatif.evidence",
    sql(
        """
SELECT p.id, p.verdict, p.requirement_id, p.site_id, s.slug, p.resource_class, COALESCE(d.hostname, t.label) AS target,
       p.device_id, p.topology_id, x.status, x.metrics, ev.metric_evaluations
FROM {progress} p
JOIN {site} s ON s.id = p.site_id
JOIN {execution} x ON x.id = p.execution_id
LEFT JOIN {evaluation} ev ON ev.execution_id = x.id
LEFT JOIN {device} d ON d.id = p.device_id
LEFT JOIN {topology} t ON t.id = p.topology_id
WHERE p.requirement_id = ANY(%(requirements)s::uuid[]) AND p.verdict = ANY(%(verdicts)s::varchar[])
  AND p.id > %(after)s
ORDER BY p.id
LIMIT %(limit)s
""",
        site=Site._meta.db_table,
    ),
    EvidenceRow,
    example=lambda: {"requirements": [uuid4(), uuid4()], "verdicts": list(REPLAYABLE), "after": 0, "limit": PAGE},
)


class CertifiedRow(NamedTuple):
    device_id: UUID


CERTIFIED = Statement(
    "fleetfile.whatif.certified",
    sql(
        """
SELECT c.device_id FROM {certificate} c
WHERE c.superseded_at IS NULL AND c.device_id IN (
    SELECT unnest(%(devices)s::uuid[])
    UNION
    SELECT m.device_id FROM unnest(%(topologies)s::uuid[], %(classes)s::varchar[]) AS u(topology_id, rc)
    JOIN {membership} m ON m.topology_id = u.topology_id
    JOIN {device} d ON d.id = m.device_id AND d.resource_class = u.rc
)
""",
        certificate=AcceptanceCertificate._meta.db_table,
    ),
    CertifiedRow,
    example=lambda: {"devices": [uuid4()], "topologies": [uuid4()], "classes": ["example"]},
)


@dataclass(frozen=True)
class TargetFlip:
    site: str
    resource_class: str
    requirement: str
    target: str
    flip: Flip
    device: bool = True  # the target is a device (its page exists), not a rack or domain
    units: dict[str, str] = field(default_factory=dict)  # metric → its unit, as measured

    def as_dict(self) -> dict[str, Any]:
        return {
            "site": self.site,
            "resource_class": self.resource_class,
            "requirement": self.requirement,
            "target": self.target,
            "target_kind": "device" if self.device else "topology",
            "from": self.flip.before.value,
            "to": self.flip.after.value,
            "rules": [
                # the one wording of a rule's outcome (`fleet_rules.readable`), as every page writes it
                rule_json(r) | {"unit": unit, "text": outcome_text(r, unit)}
                for r in self.flip.rules
                for unit in [self.units.get(r.metric, "")]
            ],
        }


@dataclass
class WhatIf:
    flips: list[TargetFlip] = field(default_factory=list)
    certificates_superseded: int = 0
    replayed: int = 0
    #: Scopes whose circuit breaker the candidate would trip, in words.
    breakers: list[str] = field(default_factory=list)
    #: What the file would change in each site's autopilot, in words.
    autopilot: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        ordered = sorted(self.flips, key=lambda f: (f.site, f.resource_class, f.requirement, f.target))
        return {
            "flips": [f.as_dict() for f in ordered],
            "certificates_superseded": self.certificates_superseded,
            "breakers": self.breakers,
            "autopilot": self.autopilot,
        }


def _rule_key(rule: Rule) -> tuple[Any, ...]:
    return (rule.metric, rule.statistic, rule.comparator, canonical_json(rule.threshold), rule.site_id)


def _changed_requirements(document: FleetDocument) -> dict[UUID, tuple[str, list[Rule]]]:
    """Existing, non-retired requirements the candidate keeps whose rules it changes:
    requirement id → (name, the candidate's rules)."""
    wanted = {
        (policy.resource_class, requirement.name): requirement
        for policy in document.policies
        for requirement in policy.requirements
        if not requirement.retired
    }
    slugs = {t.site for decl in wanted.values() for t in decl.thresholds if t.site}
    site_ids = dict(Site.objects.filter(slug__in=slugs).values_list("slug", "id"))
    existing = {
        (rc, name): requirement_id
        for requirement_id, rc, name in Requirement.objects.filter(retired_at__isnull=True).values_list(
            "id", "policy__resource_class", "name"
        )
        if (rc, name) in wanted
    }
    current: dict[UUID, set[tuple[Any, ...]]] = {requirement_id: set() for requirement_id in existing.values()}
    for requirement_id, metric, statistic, comparator, threshold, site_id in ThresholdRule.objects.filter(
        requirement_id__in=list(current)
    ).values_list("requirement_id", "metric", "statistic", "comparator", "threshold", "site_id"):
        current[requirement_id].add(_rule_key(Rule(metric, statistic, comparator, threshold, site_id)))
    changed: dict[UUID, tuple[str, list[Rule]]] = {}
    for key, requirement_id in existing.items():
        decl = wanted[key]
        rules = [
            Rule(t.metric, t.statistic, t.comparator, t.threshold, site_ids.get(t.site) if t.site else None)
            for t in decl.thresholds
        ]
        if {_rule_key(r) for r in rules} != current[requirement_id]:
            changed[requirement_id] = (decl.name, rules)
    return changed


def _pages(requirement_ids: list[UUID]) -> Iterator[list[EvidenceRow]]:
    after = 0
    while True:
        with connection.cursor() as cursor:
            rows = EVIDENCE.rows(
                cursor, {"requirements": requirement_ids, "verdicts": list(REPLAYABLE), "after": after, "limit": PAGE}
            )
        yield rows
        if len(rows) < PAGE:
            return
        after = rows[-1].id


def _json(value: Any) -> Any:
    return json.loads(value) if isinstance(value, str) else value


def policy_what_if(*, document: FleetDocument) -> WhatIf:
    """What applying `document` would flip; reads only."""
    result = WhatIf(autopilot=_autopilot_changes(document))
    changed = _changed_requirements(document)
    if not changed:
        return result
    resolutions: dict[tuple[UUID, UUID], list[dict[str, Any]]] = {}
    counted: set[UUID] = set()
    failing: dict[tuple[UUID, str, str], set[UUID]] = {}
    for rows in _pages(list(changed)):
        devices: list[UUID] = []
        topologies: list[UUID] = []
        classes: list[str] = []
        for row in rows:
            result.replayed += 1
            name, rules = changed[row.requirement_id]
            key = (row.requirement_id, row.site_id)
            if key not in resolutions:
                resolutions[key] = resolve(rules, row.site_id).rules_list
            flip = replay(
                verdict=row.verdict,
                status=row.status,
                metrics=_json(row.metrics) or {},
                current_evaluations=_json(row.metric_evaluations),
                candidate_rules=resolutions[key],
            )
            if flip is None:
                continue
            metrics = _json(row.metrics) or {}
            units = {r.metric: metric_unit(metrics, r.metric) for r in flip.rules}
            result.flips.append(
                TargetFlip(row.slug, row.resource_class, name, row.target, flip, row.device_id is not None, units)
            )
            if flip.after == Verdict.FAILED and row.device_id is not None:
                failing.setdefault((row.site_id, row.slug, row.resource_class), set()).add(row.device_id)
            if flip.before == Verdict.PASSED:
                if row.device_id is not None:
                    devices.append(row.device_id)
                else:
                    assert row.topology_id is not None  # a projection row names a device or a topology
                    topologies.append(row.topology_id)
                    classes.append(row.resource_class)
        with connection.cursor() as cursor:
            certified = CERTIFIED.rows(cursor, {"devices": devices, "topologies": topologies, "classes": classes})
        counted.update(row.device_id for row in certified)
    result.certificates_superseded = len(counted)
    result.breakers = _breakers_tripped(document, failing)
    return result


def _breakers_tripped(document: FleetDocument, failing: dict[tuple[UUID, str, str], set[UUID]]) -> list[str]:
    """The circuit breakers the candidate's new failures would trip: a threshold that fails a
    whole class is what the breaker is for, so say so before it is applied (one query)."""
    if not failing:
        return []
    classes = {rc for _, _, rc in failing}
    counts = (
        Device.objects.filter(site_id__in={s for s, _, _ in failing}, resource_class__in=classes)
        .filter(enrolled_at__isnull=False)  # enrolled: `fleet_rules.eligibility.is_enrolled`
        .exclude(state=DeviceState.DECOMMISSIONED)
        .values_list("site_id", "resource_class")
        .annotate(n=Count("id"))
        .order_by()
    )
    enrolled = {(site_id, rc): n for site_id, rc, n in counts}
    declared = {p.resource_class: p.lifecycle for p in document.policies}
    stored = dict(
        AcceptancePolicy.objects.filter(resource_class__in=classes).values_list("resource_class", "breaker_share")
    )
    found = []
    for (site_id, slug, rc), devices in sorted(failing.items(), key=lambda kv: (kv[0][1], kv[0][2])):
        share = declared[rc].breaker_share if rc in declared else stored.get(rc, BREAKER_SHARE)
        total = enrolled.get((site_id, rc), 0)
        limit = breaker_limit(total, share=share, minimum=BREAKER_MINIMUM)
        if len(devices) > limit:
            found.append(
                f"{len(devices)} of {total} {rc} devices at {slug} would newly fail: once they fail "
                f"repair_after_failures times, the circuit breaker holds the moves to repair beyond {limit} — "
                "suspect the thresholds before the hardware."
            )
    return found


def _autopilot_changes(document: FleetDocument) -> list[str]:
    """Each site's autopilot settings the file would change: "lon-1: max_under_test 64 → 32"."""
    sites = {s.slug: s for s in Site.objects.filter(slug__in=[d.slug for d in document.sites])}
    lines = []
    for decl in document.sites:
        for key, now, then in autopilot_changes(site=sites.get(decl.slug), settings=autopilot_fields(decl.autopilot)):
            lines.append(f"{decl.slug}: autopilot {key} {_setting(now)} → {_setting(then)}")
    return lines


def _setting(value: Any) -> str:
    if isinstance(value, timedelta):
        return duration_text(value)
    if isinstance(value, bool):
        return "on" if value else "off"
    return str(value)
