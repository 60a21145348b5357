"""The site page (`/sites/<slug>/`): per resource class, acceptance and a bar per requirement by
verdict, grouped by gate; flaky rates; and, for those who may see them, certification."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import NamedTuple
from uuid import UUID, uuid4

from django.db import connection
from django.db.models import Q

from fleet.burnin.certificates.reads import ClassCertification, site_certification
from fleet.burnin.diagnosis.attempts import FlakyRate
from fleet.burnin.reads.acceptance import Acceptance, acceptance
from fleet.burnin.reads.cohorts import cohort_blockers
from fleet.burnin.tables import sql
from fleet.core.statements import Statement
from fleet.inventory.models import Site
from fleet.inventory.selectors import site_by_slug
from fleet.lifecycle.models import Breaker
from fleet.policies.models import AcceptancePolicy, Requirement
from fleet_rules.attempts import flaky_sql
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
    gpu_vendor: str = ""  # who made the class's GPUs (its policy's; empty without one)


class TargetCount(NamedTuple):
    requirement_id: UUID
    verdict: str
    policy_version: int
    n: int
    flaky: int  # of them, the targets whose verdict changed between attempts (`PolicyProgress.outcomes`)
    judged: int  # of them, the targets with a judged attempt


#: The site's projection rows counted by requirement, verdict and policy version, with how many are
#: flaky and judged: one pass over the site's entries of the site-verdict index, which holds every
#: column read (an index-only scan; three scans of the rows took 0.33 s at 100,000 devices).
TARGET_COUNTS = Statement(
    "burnin.reads.site_target_counts",
    sql(
        """
SELECT p.requirement_id, p.verdict, p.policy_version, count(*) AS n,
       count(*) FILTER (WHERE {flaky}) AS flaky, count(*) FILTER (WHERE p.outcomes <> 0) AS judged
FROM {progress} p WHERE p.site_id = %(site)s
GROUP BY 1, 2, 3
""",
        flaky=flaky_sql("p.outcomes"),
    ),
    TargetCount,
    example=lambda: {"site": uuid4()},
)


@dataclass(frozen=True)
class SiteProgress:
    classes: list[ClassProgress]
    flaky: dict[str, dict[str, FlakyRate]]  # resource class → requirement → its flaky rate


def site_progress(site: Site, certification: list[ClassCertification] | None = None) -> SiteProgress:
    """Per resource class at the site: acceptance, a bar per requirement grouped by gate, and each
    requirement's flaky rate under its policy's current version (four queries; three given the
    site's certification, whose counts of enrolled and certified devices are the acceptance)."""
    if certification is None:
        by_class = acceptance([site.id])
    else:
        by_class = {(site.id, c.resource_class): Acceptance(c.enrolled, c.certified) for c in certification}
    with connection.cursor() as cursor:
        counted = TARGET_COUNTS.rows(cursor, {"site": site.id})
    # The requirements of the rows (retired ones too: their class is shown) and of the enrolled classes.
    known = Requirement.objects.filter(
        Q(id__in={row.requirement_id for row in counted}) | Q(policy__resource_class__in={rc for _, rc in by_class})
    ).select_related("policy")
    by_id = {r.id: r for r in known}
    classes = sorted({rc for _, rc in by_class} | {r.policy.resource_class for r in by_id.values()})
    counts: dict[UUID, dict[str, int]] = defaultdict(lambda: dict.fromkeys(Verdict.values, 0))
    flaky: dict[str, dict[str, FlakyRate]] = defaultdict(dict)
    for row in counted:
        counts[row.requirement_id][row.verdict] += row.n
        requirement = by_id[row.requirement_id]
        if requirement.retired_at is None and row.policy_version == requirement.policy.version and row.judged:
            before = flaky[requirement.policy.resource_class].get(requirement.name, FlakyRate(0, 0))
            flaky[requirement.policy.resource_class][requirement.name] = FlakyRate(
                before.flaky + row.flaky, before.judged + row.judged
            )
    current = sorted((r for r in by_id.values() if r.retired_at is None), key=lambda r: (r.gate, r.name))
    # Every class's policy, also one without a requirement yet (its version is shown).
    policies = {p.resource_class: p for p in AcceptancePolicy.objects.filter(resource_class__in=classes)}
    result = []
    for rc in classes:
        gates: dict[str, list[RequirementProgress]] = defaultdict(list)
        for r in current:
            if r.policy.resource_class == rc:
                gates[r.gate].append(RequirementProgress(r.name, r.gate, r.scope, r.unit, dict(counts[r.id])))
        policy = policies.get(rc)
        result.append(
            ClassProgress(
                rc,
                policy.version if policy else None,
                by_class.get((site.id, rc), Acceptance()),
                dict(gates),
                policy.gpu_vendor if policy else "",
            )
        )
    return SiteProgress(result, dict(flaky))


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
    """The site, its progress and flaky rates (four queries; three with the certification, whose
    counts are the acceptance), certification (four, when asked: the slowest devices, what they
    wait on and who blocks the racks among it) and its open circuit breakers (one)."""
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
    progress = site_progress(site, certification)
    return SitePageRead(site, progress.classes, progress.flaky, certification, blocked, breakers)
