"""The facts of one site for an autopilot pass (`fleet_rules.autopilot.SiteFacts`), read in a
fixed number of statements whatever the site's size (held by tests/autopilot/test_pass_queries.py):
the settings, the open breakers, the devices with their racks, jobs, certificates and policies,
their own targets grouped per device, the failing targets, their counted attempts, the collectives
and their newest isolation plans, and the culprits awaiting repair."""

from __future__ import annotations

from collections import defaultdict
from datetime import datetime
from uuid import UUID

from django.db.models import Count, Exists, OuterRef, Q, Subquery

from fleet.autopilot.models import SiteAutopilot
from fleet.burnin.models import AcceptanceCertificate, IsolationPlan, PolicyProgress, RemedyStep
from fleet.burnin.reads.failures import attempts_under_current_version
from fleet.inventory.models import Device, Site, TopologyMembership
from fleet.jobs.models import JobDevice
from fleet.lifecycle.models import Breaker
from fleet.policies.models import AcceptancePolicy
from fleet_rules.autopilot import FAILING, NOT_YET_RUN, CollectiveFacts, DeviceFacts, PlanFacts, Settings, SiteFacts
from fleet_rules.vocabulary import DeviceState, IsolationStatus, RemedyOutcome, TopologyUnit, Verdict

#: Which topology a device is placed in for the rack share: its rack, else its NVLink domain.
PLACEMENT_UNITS = (TopologyUnit.RACK, TopologyUnit.NVLINK_DOMAIN)
#: Worst first: a device's failing target is its failed one before an errored one.
_SEVERITY = {Verdict.FAILED: 0, Verdict.ERRORED: 1}


def site_settings(site: Site) -> SiteAutopilot:
    """The site's row (unsaved, autopilot off, when it has none)."""
    return SiteAutopilot.objects.filter(site=site).first() or SiteAutopilot(site=site)


def site_facts(site: Site, *, now: datetime, row: SiteAutopilot | None = None) -> SiteFacts:
    """Everything a pass decides on (see the module's docstring)."""
    row = row or site_settings(site)
    settings: Settings = row.settings
    if not settings.enabled or row.paused_at is not None:
        return SiteFacts(site.id, site.slug, now, settings, paused=row.paused_at is not None)
    open_breakers = frozenset(
        Breaker.objects.filter(site=site, closed_at__isnull=True).values_list("resource_class", flat=True)
    )
    placement = _placement(site)
    rack_sizes: dict[str, int] = defaultdict(int)
    for placed in placement.values():
        rack_sizes[placed] += 1
    devices = (
        Device.objects.filter(site=site, enrolled_at__isnull=False)
        .exclude(state=DeviceState.DECOMMISSIONED)
        .annotate(
            under_test=Exists(JobDevice.objects.filter(device_id=OuterRef("id"), active=True)),
            # the remediation ladder has a step under way: it runs the burn-in again itself (docs/remediation.md)
            remedying=Exists(RemedyStep.objects.filter(device_id=OuterRef("id"), outcome=RemedyOutcome.UNDER_WAY)),
            certificate_valid_until=Subquery(
                AcceptanceCertificate.objects.filter(device_id=OuterRef("id"), superseded_at__isnull=True)
                .order_by("-issued_at")
                .values("valid_until")[:1]
            ),
            repair_after_failures=Subquery(
                AcceptancePolicy.objects.filter(resource_class=OuterRef("resource_class")).values(
                    "repair_after_failures"
                )[:1]
            ),
        )
        .values_list(
            "id",
            "hostname",
            "resource_class",
            "state",
            "under_test",
            "remedying",
            "certificate_valid_until",
            "repair_after_failures",
        )
    )
    own = {
        r["device_id"]: r
        for r in PolicyProgress.objects.filter(site=site, device__isnull=False)
        .values("device_id")
        .annotate(
            total=Count("id"),
            passed=Count("id", filter=Q(verdict=Verdict.PASSED)),
            not_run=Count("id", filter=Q(verdict__in=list(NOT_YET_RUN))),
        )
        .order_by()
    }
    failing_rows = list(
        PolicyProgress.objects.filter(site=site, verdict__in=list(FAILING)).values_list(
            "requirement_id", "target_id", "policy_version", "verdict", "finished_at", "device_id", "topology_id"
        )
    )
    attempts = attempts_under_current_version([(r, t, v) for r, t, v, *_ in failing_rows])
    worst: dict[UUID, tuple[Verdict, int, datetime | None]] = {}
    for requirement_id, target_id, _, verdict, finished_at, device_id, _ in failing_rows:
        if device_id is None:
            continue
        mine = (Verdict(verdict), attempts.get((requirement_id, target_id), 0), finished_at)
        held = worst.get(device_id)
        if held is None or (_SEVERITY[mine[0]], -mine[1]) < (_SEVERITY[held[0]], -held[1]):
            worst[device_id] = mine
    facts: list[DeviceFacts] = []
    for device_id, hostname, resource_class, state, under_test, remedying, valid_until, limit in devices:
        counts = own.get(device_id, {})
        failing = worst.get(device_id)
        place = placement.get(device_id)
        facts.append(
            DeviceFacts(
                device_id=device_id,
                hostname=hostname,
                resource_class=resource_class,
                state=state,
                enrolled=True,
                rack=place,
                rack_size=rack_sizes[place] if place else 1,
                under_test=under_test,
                remedying=remedying,
                not_run=counts.get("not_run", 0),
                failing=failing[0] if failing else None,
                attempts=failing[1] if failing else 0,
                last_finished_at=failing[2] if failing else None,
                repair_after_failures=limit,
                passing_alone=bool(counts) and counts["total"] == counts["passed"],
                certificate_valid_until=valid_until,
            )
        )
    return SiteFacts(
        site_id=site.id,
        slug=site.slug,
        now=now,
        settings=settings,
        open_breakers=open_breakers,
        class_limits={str(k): int(v) for k, v in (row.class_limits or {}).items()},
        devices=facts,
        collectives=_collectives(site, attempts),
    )


def _placement(site: Site) -> dict[UUID, str]:
    """Each device's rack label (its NVLink domain's when it has no rack): one statement."""
    placed: dict[UUID, str] = {}
    rows = (
        TopologyMembership.objects.filter(device__site=site, unit__in=list(PLACEMENT_UNITS))
        .order_by("device_id", "unit")
        .values_list("device_id", "unit", "topology__label")
    )
    rank: dict[str, int] = {unit.value: i for i, unit in enumerate(PLACEMENT_UNITS)}
    best: dict[UUID, int] = {}
    for device_id, unit, label in rows:
        if device_id not in best or rank[unit] < best[device_id]:
            best[device_id] = rank[unit]
            placed[device_id] = f"{unit}:{label}"
    return placed


def _collectives(site: Site, attempts: dict[tuple[UUID, UUID], int]) -> list[CollectiveFacts]:
    """The site's topology targets that have not passed, with their enrolled members, newest plan
    and whether its culprits await repair (four statements)."""
    rows = list(
        PolicyProgress.objects.filter(site=site, topology__isnull=False)
        .exclude(verdict=Verdict.PASSED)
        .values_list("topology_id", "topology__label", "requirement_id", "requirement__name", "verdict", "finished_at")
    )
    if not rows:
        return []
    topology_ids = {r[0] for r in rows}
    members: dict[UUID, list[UUID]] = defaultdict(list)
    for topology_id, device_id in (
        TopologyMembership.objects.filter(topology_id__in=topology_ids, device__enrolled_at__isnull=False)
        .exclude(device__state=DeviceState.DECOMMISSIONED)
        .order_by("device_id")
        .values_list("topology_id", "device_id")
    ):
        members[topology_id].append(device_id)
    plans = {
        (p.topology_id, p.requirement_id): p
        for p in IsolationPlan.objects.filter(site=site, topology_id__in=topology_ids)
        .order_by("topology_id", "requirement_id", "-created_at")
        .distinct("topology_id", "requirement_id")
        .only("id", "topology_id", "requirement_id", "status", "created_at", "state")
    }
    culprits = {
        str(c) for p in plans.values() if p.status == IsolationStatus.FOUND for c in (p.state.get("culprits") or [])
    }
    awaiting = {
        str(d)
        for d in Device.objects.filter(id__in=culprits, state=DeviceState.NEEDS_REPAIR).values_list("id", flat=True)
    }
    out = []
    for topology_id, label, requirement_id, requirement_name, verdict, finished_at in rows:
        plan = plans.get((topology_id, requirement_id))
        out.append(
            CollectiveFacts(
                topology_id=topology_id,
                label=label,
                requirement_name=requirement_name,
                verdict=Verdict(verdict),
                member_ids=tuple(members.get(topology_id, ())),
                attempts=attempts.get((requirement_id, topology_id), 0),
                finished_at=finished_at,
                plan=PlanFacts(
                    plan_id=plan.id,
                    running=plan.status == IsolationStatus.RUNNING,
                    created_at=plan.created_at,
                    culprits_await_repair=bool({str(c) for c in plan.state.get("culprits") or []} & awaiting),
                    inconclusive=plan.status == IsolationStatus.INCONCLUSIVE,
                )
                if plan is not None
                else None,
            )
        )
    return out
