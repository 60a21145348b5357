"""Policy reads shared by the operations: threshold resolutions for many (requirement, site)
pairs at once (the rule itself is `fleet_rules.resolution`)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from uuid import UUID

from fleet.core.exceptions import NotFoundError
from fleet.inventory.identity import Actor, ensure_site_allowed
from fleet.inventory.models import Site
from fleet.policies.models import Requirement, ThresholdRule
from fleet_rules.resolution import Resolution, Rule, resolve


def load_resolutions(pairs: Iterable[tuple[UUID, UUID]]) -> dict[tuple[UUID, UUID], Resolution]:
    """Resolve every distinct (requirement_id, site_id) pair with one query."""
    wanted = set(pairs)
    if not wanted:
        return {}
    requirement_ids = {requirement_id for requirement_id, _ in wanted}
    site_ids = {site_id for _, site_id in wanted}
    rules_by_requirement: dict[UUID, list[Rule]] = defaultdict(list)
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


@dataclass(frozen=True)
class ResolvedThresholds:
    requirement_id: UUID
    requirement_name: str
    site_id: UUID
    policy_version: int
    resolution: Resolution

    @property
    def canonical_json(self) -> str:
        return self.resolution.canonical.decode()


def resolved_thresholds(*, requirement_id: UUID, site_id: UUID, actor: Actor) -> ResolvedThresholds:
    """What judges a requirement's executions at a site (404 for an unknown requirement or site;
    403 for a satellite client asking about another site)."""
    try:
        requirement = Requirement.objects.select_related("policy").get(id=requirement_id)
    except Requirement.DoesNotExist:
        raise NotFoundError(f"No requirement {requirement_id}.") from None
    try:
        site = Site.objects.get(id=site_id)
    except Site.DoesNotExist:
        raise NotFoundError(f"No site {site_id}.") from None
    ensure_site_allowed(actor, site.id)
    return ResolvedThresholds(
        requirement_id=requirement.id,
        requirement_name=requirement.name,
        site_id=site.id,
        policy_version=requirement.policy.version,
        resolution=load_resolutions([(requirement.id, site.id)])[(requirement.id, site.id)],
    )
