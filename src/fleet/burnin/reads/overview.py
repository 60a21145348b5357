"""The fleet overview (`/`): every site's inventory, acceptance, targets by verdict and active jobs."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from uuid import UUID

from django.db.models import Count

from fleet.burnin.models import PolicyProgress
from fleet.burnin.reads.acceptance import Acceptance, acceptance
from fleet.inventory.selectors import SiteInventory, sites_inventory
from fleet.jobs.selectors import active_job_counts
from fleet_rules.vocabulary import Verdict


def verdict_counts(site_ids: Sequence[UUID]) -> dict[UUID, dict[str, int]]:
    """Projection rows per site and verdict (one query)."""
    counts: dict[UUID, dict[str, int]] = defaultdict(lambda: dict.fromkeys(Verdict.values, 0))
    rows = (
        PolicyProgress.objects.filter(site_id__in=site_ids)
        .values_list("site_id", "verdict")
        .annotate(n=Count("id"))
        .order_by()
    )
    for site_id, verdict, n in rows:
        counts[site_id][verdict] = n
    return counts


@dataclass(frozen=True)
class SiteSummary:
    """One site's card on the overview."""

    inventory: SiteInventory
    acceptance: Acceptance
    verdicts: dict[str, int]
    active_jobs: int


@dataclass(frozen=True)
class OverviewRead:
    sites: list[SiteSummary]


def overview_page() -> OverviewRead:
    """Every site, in slug order (six queries: inventory three, acceptance, verdicts, active jobs)."""
    inventory = sites_inventory()
    site_ids = [s.site.id for s in inventory]
    accepted = acceptance(site_ids)
    verdicts = verdict_counts(site_ids)
    active = active_job_counts(site_ids)
    return OverviewRead(
        [
            SiteSummary(
                inventory=s,
                acceptance=sum((a for (site_id, _), a in accepted.items() if site_id == s.site.id), Acceptance()),
                verdicts=verdicts.get(s.site.id, {}),
                active_jobs=active.get(s.site.id, 0),
            )
            for s in inventory
        ]
    )
