"""The site page (`/sites/<slug>/`): per resource class, acceptance and a bar per requirement by
verdict, grouped by gate; flaky rates; and, for those who may see them, certification."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from uuid import UUID

from django.db.models import Count

from fleet.burnin.certificates.reads import ClassCertification, site_certification
from fleet.burnin.diagnosis.attempts import FlakyRate, flaky_rates
from fleet.burnin.models import PolicyProgress
from fleet.burnin.reads.acceptance import Acceptance, acceptance
from fleet.burnin.reads.cohorts import cohort_blockers
from fleet.inventory.models import Site
from fleet.inventory.selectors import site_by_slug
from fleet.lifecycle.models import Breaker
from fleet.policies.models import AcceptancePolicy, Requirement
from fleet_rules.vocabulary import RequirementScope, TopologyUnit, Verdict

UNIT_PLURALS: dict[str, str] = {
    TopologyUnit.NVLINK_DOMAIN: "domains",
    TopologyUnit.POD: "pods",
    TopologyUnit.RACK: "racks",
}


@dataclass(frozen=True)
class RequirementProgress:
    """One bar of the site page: a requirement's targets by verdict."""

    name: str
    gate: str
    scope: str
    unit: str | None
    counts: dict[str, int]

    @property
    def total(self) -> int:
        return sum(self.counts.values())

    @property
    def target_word(self) -> str:
        """What this requirement's targets are: devices, or racks (domains, pods)."""
        if self.scope == RequirementScope.MULTI_NODE and self.unit:
            plural = UNIT_PLURALS.get(self.unit, f"{self.unit}s")
        else:
            plural = "devices"
        return plural[:-1] if self.total == 1 else plural

    def share(self, verdict: str) -> float:
        return self.counts.get(verdict, 0) / self.total if self.total else 0.0


@dataclass(frozen=True)
class ClassProgress:
    resource_class: str
    policy_version: int | None
    acceptance: Acceptance
    gates: dict[str, list[RequirementProgress]]  # gate → bars, in requirement-name order


def site_progress(site: Site) -> list[ClassProgress]:
    """Per resource class at the site: acceptance, and a bar per requirement grouped by gate
    (four queries)."""
    by_class = acceptance([site.id])
    classes = sorted({rc for _, rc in by_class} | _projected_classes(site))
    policies = {p.resource_class: p for p in AcceptancePolicy.objects.filter(resource_class__in=classes)}
    requirements = list(
        Requirement.objects.filter(policy__resource_class__in=classes, retired_at__isnull=True)
        .select_related("policy")
        .order_by("gate", "name")
    )
    counts: dict[UUID, dict[str, int]] = defaultdict(lambda: dict.fromkeys(Verdict.values, 0))
    for requirement_id, verdict, n in (
        PolicyProgress.objects.filter(site=site)
        .values_list("requirement_id", "verdict")
        .annotate(n=Count("id"))
        .order_by()
    ):
        counts[requirement_id][verdict] = n
    result = []
    for rc in classes:
        gates: dict[str, list[RequirementProgress]] = defaultdict(list)
        for r in requirements:
            if r.policy.resource_class == rc:
                gates[r.gate].append(RequirementProgress(r.name, r.gate, r.scope, r.unit, dict(counts[r.id])))
        policy = policies.get(rc)
        result.append(
            ClassProgress(
                rc, policy.version if policy else None, by_class.get((site.id, rc), Acceptance()), dict(gates)
            )
        )
    return result


def _projected_classes(site: Site) -> set[str]:
    # `order_by()` clears the model's ordering, which Django would otherwise add to the DISTINCT
    # (every row's site, satellite, requirement and target: a sort of the whole projection).
    return set(PolicyProgress.objects.filter(site=site).order_by().values_list("resource_class", flat=True).distinct())


@dataclass(frozen=True)
class SitePageRead:
    site: Site
    classes: list[ClassProgress]
    flaky: dict[str, dict[str, FlakyRate]]  # resource class → requirement → its flaky rate
    certification: list[ClassCertification] | None  # None: not asked for (the viewer may not see it)
    #: resource class → rack → who blocks it, for the racks the slowest devices wait on
    blocked: dict[str, dict[UUID, str]] = field(default_factory=dict)
    #: The open circuit breakers: automatic moves to repair held (`fleet.lifecycle`).
    open_breakers: list[Breaker] = field(default_factory=list)


def site_page(slug: str, *, with_certification: bool) -> SitePageRead:
    """The site, its progress (four queries), flaky rates (one), certification (four, when asked:
    the slowest devices, what they wait on and who blocks the racks among it) and its open circuit
    breakers (one)."""
    site = site_by_slug(slug)
    certification = site_certification(site) if with_certification else None
    blocked: dict[str, dict[UUID, str]] = {}
    if certification is not None:
        racks = {
            (topology_id, c.resource_class)
            for c in certification
            for w in c.slowest
            for name, verdict in w.waiting_on
            if verdict == Verdict.NOT_RUN and (topology_id := w.racks.get(name)) is not None
        }
        for (topology_id, rc), why in cohort_blockers(racks).items():
            blocked.setdefault(rc, {})[topology_id] = why.text
    breakers = list(Breaker.objects.filter(site=site, closed_at__isnull=True).order_by("resource_class"))
    return SitePageRead(site, site_progress(site), flaky_rates(site), certification, blocked, breakers)
