"""`fleet apply`: make the database hold what a fleet file declares, idempotently.

Validation happens before any write (the document, then its references to the database); the writes
run in one transaction (a site's `autopilot:` too). A policy's version rises once when anything that
judges devices changed (GPU vendor, requirements, thresholds, overrides, parameter constraints).
"""

from __future__ import annotations

import operator
from collections import defaultdict
from dataclasses import asdict, dataclass, replace
from functools import reduce
from typing import Any

from django.db import transaction
from django.db.models import Exists, OuterRef, Q
from django.utils import timezone

from fleet.burnin.certificates.acceptance import overrides_record, refusal, uncertified
from fleet.burnin.models import TestExecution
from fleet.core.locks import lock_keys_in_pk_order
from fleet.core.statistics import tables_analyse
from fleet.fleetfile.autopilot import site_autopilot_apply
from fleet.fleetfile.document import (
    DeviceDecl,
    FleetDocument,
    FleetFileError,
    PolicyDecl,
    RequirementDecl,
    SiteDecl,
)
from fleet.fleetfile.subscriptions import subscriptions_apply
from fleet.fleetfile.summary import ApplySummary, Change
from fleet.inventory.models import (
    Device,
    Satellite,
    Site,
    Topology,
    TopologyMembership,
)
from fleet.jobs.models import Job, JobDevice
from fleet.lifecycle.selectors import system_moved
from fleet.lifecycle.services import Move, Refused, transitions_apply
from fleet.policies.models import AcceptancePolicy, ParameterProfile, Requirement, ThresholdRule
from fleet_rules.lifecycle import needs_certificate as lifecycle_needs_certificate
from fleet_rules.lifecycle import refusal as lifecycle_refusal
from fleet_rules.vocabulary import DeviceState, Mover, TransitionCause


class _DryRun(Exception):
    pass


@dataclass(frozen=True)
class AcceptanceOverride:
    """`fleet apply --force --reason R`: who forces devices the file declares `accepted` without a
    valid certificate, and why (recorded per device)."""

    actor: str
    reason: str


def fleet_apply(
    *,
    document: FleetDocument,
    prune: bool = False,
    dry_run: bool = False,
    force_accept: AcceptanceOverride | None = None,
) -> ApplySummary:
    """Apply `document`; with `dry_run` compute the same summary and roll everything back. A device
    the file moves to `accepted` without a valid acceptance certificate is a problem of the file
    unless `force_accept` says who overrides and why."""
    _check_references(document)
    summary = ApplySummary(dry_run=dry_run)
    try:
        with transaction.atomic():
            _Applier(summary, prune, force_accept).apply(document)
            if dry_run:
                raise _DryRun
    except _DryRun:
        pass
    if summary.changed and not dry_run:
        # A large apply is a bulk load: plan the next sweeps on what is there now.
        tables_analyse(Site, Satellite, Topology, Device, TopologyMembership)
    return summary


def _check_references(document: FleetDocument) -> None:
    """Problems that need the database: override sites must exist (in the file or already)."""
    declared = {site.slug for site in document.sites}
    referenced = {
        (p_index, r_index, t_index): threshold.site
        for p_index, policy in enumerate(document.policies)
        for r_index, requirement in enumerate(policy.requirements)
        for t_index, threshold in enumerate(requirement.thresholds)
        if threshold.site
    }
    known = declared | set(Site.objects.filter(slug__in=set(referenced.values())).values_list("slug", flat=True))
    problems = [
        (f"policies[{p}].requirements[{r}].thresholds[{t}].site", f"no site {slug!r} in the file or the database")
        for (p, r, t), slug in referenced.items()
        if slug not in known
    ]
    if problems:
        raise FleetFileError(problems)


class _Applier:
    def __init__(
        self,
        summary: ApplySummary,
        prune: bool,
        force_accept: AcceptanceOverride | None = None,
        actor: str = "fleet-apply",
    ) -> None:
        self.summary = summary
        self.actor = force_accept.actor if force_accept is not None else actor
        self.prune = prune
        self.force_accept = force_accept
        self.site_index = 0
        self.now = timezone.now()
        self.site_ids: dict[str, Any] = {}
        self.membership_adds: list[TopologyMembership] = []
        self.membership_removals: list[tuple[Any, str]] = []

    def count(self, kind: str, outcome: Change, n: int = 1) -> None:
        counts = self.summary.counts[kind]
        setattr(counts, outcome, getattr(counts, outcome) + n)

    def apply(self, document: FleetDocument) -> None:
        for index, site in enumerate(document.sites):
            self.site_index = index
            self.apply_site(site)
        self.site_ids.update(dict(Site.objects.filter(slug__in=_override_slugs(document)).values_list("slug", "id")))
        for policy in document.policies:
            self.apply_policy(policy)
        self.apply_profiles(document)
        subscriptions_apply(document, count=self.count, notes=self.summary.notes)

    # --- inventory --------------------------------------------------------------------------

    def apply_site(self, decl: SiteDecl) -> None:
        site = Site.objects.filter(slug=decl.slug).first()
        if site is None:
            site = Site.objects.create(slug=decl.slug, name=decl.name)
            self.count("sites", Change.CREATED)
        elif site.name != decl.name:
            site.name = decl.name
            site.save(update_fields=["name", "updated_at"])
            self.count("sites", Change.UPDATED)
        else:
            self.count("sites", Change.UNCHANGED)
        self.site_ids[site.slug] = site.id

        satellites = {s.name: s for s in Satellite.objects.filter(site=site)}
        for sat in decl.satellites:
            if sat.name in satellites:
                self.count("satellites", Change.UNCHANGED)
            else:
                satellites[sat.name] = Satellite.objects.create(site=site, name=sat.name)
                self.count("satellites", Change.CREATED)

        topologies = {(t.unit, t.label): t for t in Topology.objects.filter(site=site)}
        for t in decl.topologies:
            existing = topologies.get((t.unit, t.label))
            satellite = satellites[t.satellite]
            if existing is None:
                topologies[(t.unit, t.label)] = Topology.objects.create(
                    site=site, unit=t.unit, label=t.label, satellite=satellite
                )
                self.count("topologies", Change.CREATED)
            elif existing.satellite_id != satellite.id:
                existing.satellite = satellite
                existing.save(update_fields=["satellite", "updated_at"])
                self.count("topologies", Change.UPDATED)
            else:
                self.count("topologies", Change.UNCHANGED)

        self.apply_devices(site, decl.devices, satellites, topologies)
        site_autopilot_apply(site, decl.autopilot)
        if self.prune:
            self.prune_site(site, decl)

    def apply_devices(self, site: Site, decls: list[DeviceDecl], satellites, topologies) -> None:
        existing = {d.hostname: d for d in Device.objects.filter(site=site)}
        decls = self.gate_lifecycle(decls, existing)
        refused = self.gate_acceptance(decls, existing)
        memberships: dict[Any, dict[str, Any]] = defaultdict(dict)
        for device_id, unit, topology_id in TopologyMembership.objects.filter(device__site=site).values_list(
            "device_id", "unit", "topology_id"
        ):
            memberships[device_id][unit] = topology_id
        to_create, to_update = [], []
        before = {d.id: d.state for d in existing.values()}
        where = {d.hostname: i for i, d in enumerate(decls)}
        for decl in decls:
            satellite = satellites[decl.satellite]
            device = existing.get(decl.hostname)
            enrolled_at = (device.enrolled_at if device and device.enrolled_at else self.now) if decl.enrolled else None
            fields = {
                "serial": decl.serial,
                "resource_class": decl.resource_class,
                "satellite_id": satellite.id,
                "state": decl.state,
                "enrolled_at": enrolled_at,
            }
            wanted = {unit: topologies[(unit, label)].id for unit, label in decl.topologies.items()}
            if device is None:
                device = Device(site=site, hostname=decl.hostname, **fields)
                to_create.append(device)
                existing[decl.hostname] = device
                self.count("devices", Change.CREATED)
                memberships_changed = self.set_memberships(device, {}, wanted)
            else:
                differs = any(getattr(device, k) != v for k, v in fields.items())
                if differs:
                    for k, v in fields.items():
                        setattr(device, k, v)
                    to_update.append(device)
                memberships_changed = self.set_memberships(device, memberships.get(device.id, {}), wanted)
                self.count("devices", Change.UPDATED if differs or memberships_changed else Change.UNCHANGED)
        Device.objects.bulk_create(to_create)
        if to_update:
            # Locked as every writer of devices locks them, before the states move (the lifecycle's
            # writer, which compare-and-sets each on the state read above) and the rest is written.
            lock_keys_in_pk_order(Device.objects.filter(id__in=[d.id for d in to_update]))
            self.move_states(to_update, before, {d.hostname for d in decls if d.hostname in refused}, where)
            for device in to_update:
                device.updated_at = self.now
            Device.objects.bulk_update(
                to_update, ["serial", "resource_class", "satellite_id", "enrolled_at", "updated_at"]
            )
        self.flush_memberships()
        if self.force_accept is not None and refused:
            overrides_record(
                device_ids=[existing[h].id for h in refused],
                actor=self.force_accept.actor,
                reason=self.force_accept.reason,
            )

    def gate_lifecycle(self, decls: list[DeviceDecl], existing: dict[str, Device]) -> list[DeviceDecl]:
        """The file's state changes go through the lifecycle table (a refused one is a problem of the
        file). A device the service moved since (its certificate, its failures, a repair) keeps its
        state: the file is older than the evidence, and a note says so (one query)."""
        changing = {d.hostname: d for d in decls if d.hostname in existing and existing[d.hostname].state != d.state}
        moved_by_service = system_moved({existing[h].id for h in changing})
        kept, problems = [], []
        where = {d.hostname: i for i, d in enumerate(decls)}
        for decl in decls:
            device = existing.get(decl.hostname)
            if device is None or decl.hostname not in changing:
                kept.append(decl)
                continue
            if device.id in moved_by_service:
                cause = moved_by_service[device.id]
                self.summary.notes.append(
                    f"{decl.hostname}: the file says {decl.state}, the service moved it to {device.state} ({cause}); "
                    "left as it is (fleet export writes the current state)"
                )
                kept.append(replace(decl, state=device.state))
                continue
            why = lifecycle_refusal(device.state, decl.state, Mover.FLEET_FILE, TransitionCause.FLEET_FILE)
            if why is not None and not lifecycle_needs_certificate(device.state, decl.state, Mover.FLEET_FILE):
                problems.append((f"sites[{self.site_index}].devices[{where[decl.hostname]}].state", why))
            kept.append(decl)
        if problems:
            raise FleetFileError(problems)
        return kept

    def move_states(
        self, updated: list[Device], before: dict[Any, str], forced: set[str], where: dict[str, int]
    ) -> None:
        """The file's state changes, through the lifecycle's writer (one statement): each
        compare-and-sets the state read when the file was checked, so a device another change moved
        meanwhile (a reconcile page's certificate, a repair) is a problem of this apply naming it,
        and nothing is written; apply again to judge the file against where it is now."""
        moves = [
            Move(
                d.id,
                DeviceState(d.state),
                Mover.FLEET_FILE,
                TransitionCause.FLEET_FILE,
                self.actor,
                "fleet apply" if d.hostname not in forced else f"fleet apply --force: {self.forced_because}",
                expected=DeviceState(before[d.id]),
                certified=d.hostname not in forced,
                forced=d.hostname in forced,
            )
            for d in updated
            if before.get(d.id) is not None and before[d.id] != d.state
        ]
        refused = transitions_apply(moves, now=self.now).refused
        if refused:
            raise FleetFileError([self.refusal_problem(r, where) for r in refused])

    @property
    def forced_because(self) -> str:
        return self.force_accept.reason if self.force_accept is not None else ""

    def refusal_problem(self, refused: Refused, where: dict[str, int]) -> tuple[str, str]:
        index = where.get(refused.hostname)
        return (f"sites[{self.site_index}].devices[{index}].state" if index is not None else "", refused.why)

    def gate_acceptance(self, decls: list[DeviceDecl], existing: dict[str, Device]) -> list[str]:
        """The hostnames the file moves to `accepted` (new devices declared accepted included)
        without a valid certificate: problems of the file, unless the override is given."""
        moving = [
            d.hostname
            for d in decls
            if d.state == DeviceState.ACCEPTED
            and (d.hostname not in existing or existing[d.hostname].state != DeviceState.ACCEPTED)
        ]
        lacking = uncertified(existing[h].id for h in moving if h in existing)
        refused = [h for h in moving if h not in existing or existing[h].id in lacking]
        if refused and self.force_accept is None:
            where = {d.hostname: i for i, d in enumerate(decls)}
            raise FleetFileError(
                [
                    (
                        f"sites[{self.site_index}].devices[{where[h]}].state",
                        f"{refusal(h)} (fleet apply --force --reason …)",
                    )
                    for h in refused
                ]
            )
        return refused

    def set_memberships(self, device: Device, current: dict[str, Any], wanted: dict[str, Any]) -> bool:
        changed = False
        for unit, topology_id in current.items():
            if wanted.get(unit) != topology_id:
                self.membership_removals.append((device.id, unit))
                changed = True
        for unit, topology_id in wanted.items():
            if current.get(unit) != topology_id:
                self.membership_adds.append(TopologyMembership(device=device, topology_id=topology_id, unit=unit))
                changed = True
        return changed

    def flush_memberships(self) -> None:
        """Removals in one statement, then additions in one (a device may move within a unit)."""
        if self.membership_removals:
            TopologyMembership.objects.filter(
                reduce(operator.or_, (Q(device_id=d, unit=u) for d, u in self.membership_removals))
            ).delete()
        TopologyMembership.objects.bulk_create(self.membership_adds)
        self.membership_adds, self.membership_removals = [], []

    def prune_site(self, site: Site, decl: SiteDecl) -> None:
        """Devices absent from the file: deleted when they have no burn-in history, else
        decommissioned through the lifecycle's writer (one statement, with their history entries)."""
        declared_hosts = {d.hostname for d in decl.devices}
        absent = (
            Device.objects.filter(site=site)
            .exclude(hostname__in=declared_hosts)
            .annotate(
                has_history=Exists(TestExecution.objects.filter(device=OuterRef("pk")))
                | Exists(JobDevice.objects.filter(device=OuterRef("pk")))
            )
        )
        decommissioned: list[Move] = []
        for device in absent:
            if device.has_history:
                if device.state != DeviceState.DECOMMISSIONED:
                    decommissioned.append(
                        Move(
                            device.id,
                            DeviceState.DECOMMISSIONED,
                            Mover.FLEET_FILE,
                            TransitionCause.FLEET_FILE,
                            self.actor,
                            "fleet apply --prune: absent from the file, with burn-in history",
                            expected=DeviceState(device.state),
                        )
                    )
                    self.count("devices", Change.REMOVED)
                    self.summary.notes.append(
                        f"{site.slug}/{device.hostname} has burn-in history: decommissioned, not deleted"
                    )
            else:
                device.delete()
                self.count("devices", Change.REMOVED)
        refused = transitions_apply(decommissioned, now=self.now).refused
        if refused:
            raise FleetFileError([(f"sites[{self.site_index}]", f"--prune: {r.why}") for r in refused])
        declared_topologies = {(t.unit, t.label) for t in decl.topologies}
        for topology in Topology.objects.filter(site=site).annotate(
            has_history=Exists(TestExecution.objects.filter(topology=OuterRef("pk")))
            | Exists(Job.objects.filter(topology=OuterRef("pk")))
        ):
            if (topology.unit, topology.label) in declared_topologies:
                continue
            if topology.has_history:
                emptied, _ = TopologyMembership.objects.filter(topology=topology).delete()
                if emptied:
                    self.count("topologies", Change.REMOVED)
                    self.summary.notes.append(
                        f"{site.slug}/{topology.unit}:{topology.label} has burn-in history: emptied, not deleted"
                    )
            else:
                topology.delete()
                self.count("topologies", Change.REMOVED)

    # --- policies ---------------------------------------------------------------------------

    def apply_policy(self, decl: PolicyDecl) -> None:
        existing = AcceptancePolicy.objects.filter(resource_class=decl.resource_class).first()
        created = existing is None
        settings = asdict(decl.lifecycle) | {"gpu_vendor": decl.gpu_vendor}  # written as the lifecycle settings
        if existing is None:
            policy = AcceptancePolicy.objects.create(
                resource_class=decl.resource_class, description=decl.description, **settings
            )
            self.count("policies", Change.CREATED)
        else:
            policy = existing
        requirements = {r.name: r for r in Requirement.objects.filter(policy=policy)}
        rules_by_requirement: dict[Any, dict[tuple, ThresholdRule]] = defaultdict(dict)
        for rule in ThresholdRule.objects.filter(requirement__policy=policy):
            rules_by_requirement[rule.requirement_id][(rule.metric, rule.statistic, rule.site_id)] = rule

        judged_change = policy.gpu_vendor != decl.gpu_vendor  # other GPUs, other tools: the old evidence judges none
        for req_decl in decl.requirements:
            requirement = requirements.get(req_decl.name)
            judged_change |= self.apply_requirement(policy, requirement, req_decl, rules_by_requirement)
        declared = {r.name for r in decl.requirements}
        for name, requirement in requirements.items():
            if name not in declared and requirement.retired_at is None:
                requirement.retired_at = self.now
                requirement.save(update_fields=["retired_at", "updated_at"])
                self.count("requirements", Change.REMOVED)
                self.summary.notes.append(f"{decl.resource_class}: requirement {name!r} retired (absent from the file)")
                judged_change = True

        if created:
            self.summary.policy_versions[policy.resource_class] = (None, policy.version)
            return
        # The lifecycle settings judge nothing: changing them does not raise the version.
        description_changed = policy.description != decl.description or any(
            getattr(policy, k) != v for k, v in settings.items()
        )
        for k, v in settings.items():
            setattr(policy, k, v)
        if judged_change:
            old = policy.version
            policy.version = old + 1
            policy.version_changed_at = self.now
            self.summary.policy_versions[policy.resource_class] = (old, policy.version)
        if judged_change or description_changed:
            policy.description = decl.description
            policy.save(update_fields=["version", "version_changed_at", "description", *settings, "updated_at"])
            self.count("policies", Change.UPDATED)
        else:
            self.count("policies", Change.UNCHANGED)

    def apply_requirement(self, policy, requirement, decl: RequirementDecl, rules_by_requirement) -> bool:
        """Create or update one requirement and its rules; True when anything that judges changed."""
        fields = {
            "gate": decl.gate,
            "scope": decl.scope,
            "unit": decl.unit,
            "test": decl.test,
            "rerunnable": decl.rerunnable,
            "parameter_constraints": decl.parameter_constraints,
            "consecutive_passes": decl.consecutive_passes,
            "evidence_valid_for": decl.evidence_valid_for,
        }
        changed = False
        if requirement is None:
            requirement = Requirement.objects.create(
                policy=policy,
                name=decl.name,
                retired_at=self.now if decl.retired else None,
                outlier_k=decl.outlier_k,
                metric_units=decl.metric_units,
                **fields,
            )
            self.count("requirements", Change.CREATED)
            changed = True
        else:
            differs = any(getattr(requirement, k) != v for k, v in fields.items())
            if decl.retired != (requirement.retired_at is not None):
                requirement.retired_at = self.now if decl.retired else None
                differs = True
            if differs:
                for k, v in fields.items():
                    setattr(requirement, k, v)
                requirement.save()
                self.count("requirements", Change.UPDATED)
                changed = True
            elif requirement.outlier_k != decl.outlier_k or requirement.metric_units != decl.metric_units:
                self.count("requirements", Change.UPDATED)
            else:
                self.count("requirements", Change.UNCHANGED)
            if requirement.outlier_k != decl.outlier_k or requirement.metric_units != decl.metric_units:
                # Diagnosis and units only: which siblings are outliers and how values are shown
                # judge no target, so no new version.
                requirement.outlier_k = decl.outlier_k
                requirement.metric_units = decl.metric_units
                requirement.save(update_fields=["outlier_k", "metric_units", "updated_at"])

        current = rules_by_requirement.get(requirement.id, {})
        wanted = {(t.metric, t.statistic, self.site_ids.get(t.site) if t.site else None): t for t in decl.thresholds}
        for key, t in wanted.items():
            rule = current.get(key)
            if rule is None:
                ThresholdRule.objects.create(
                    requirement=requirement,
                    metric=t.metric,
                    statistic=t.statistic,
                    comparator=t.comparator,
                    threshold=t.threshold,
                    site_id=key[2],
                )
                self.count("thresholds", Change.CREATED)
                changed = True
            elif rule.comparator != t.comparator or not _same_value(rule.threshold, t.threshold):
                rule.comparator, rule.threshold = t.comparator, t.threshold
                rule.save(update_fields=["comparator", "threshold", "updated_at"])
                self.count("thresholds", Change.UPDATED)
                changed = True
            else:
                self.count("thresholds", Change.UNCHANGED)
        stale = [rule.id for key, rule in current.items() if key not in wanted]
        if stale:
            ThresholdRule.objects.filter(id__in=stale).delete()
            self.count("thresholds", Change.REMOVED, len(stale))
            changed = True
        return changed

    def apply_profiles(self, document: FleetDocument) -> None:
        existing = {(p.resource_class, p.test, p.name): p for p in ParameterProfile.objects.all()}
        for decl in document.parameter_profiles:
            profile = existing.get((decl.resource_class, decl.test, decl.name))
            if profile is None:
                ParameterProfile.objects.create(
                    resource_class=decl.resource_class, test=decl.test, name=decl.name, parameters=decl.parameters
                )
                self.count("parameter_profiles", Change.CREATED)
            elif profile.parameters != decl.parameters:
                profile.parameters = decl.parameters
                profile.save(update_fields=["parameters", "updated_at"])
                self.count("parameter_profiles", Change.UPDATED)
            else:
                self.count("parameter_profiles", Change.UNCHANGED)


def _override_slugs(document: FleetDocument) -> set[str]:
    return {t.site for p in document.policies for r in p.requirements for t in r.thresholds if t.site}


def _same_value(a: Any, b: Any) -> bool:
    return (
        type(a) is type(b)
        and a == b
        or (
            isinstance(a, (int, float))
            and isinstance(b, (int, float))
            and not isinstance(a, bool)
            and not isinstance(b, bool)
            and a == b
        )
    )
