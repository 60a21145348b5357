"""The demo's operator: what a person at the dashboard would do, every few seconds, in one place
(the autopilot will take this over). Each pass, for every site:

1. **records the repairs** the technician made: a device that waited `repair_after` seconds in
   `needs_repair` gets its faulty GPU swapped (`fleet.demo.story.Technician`) and the repair is
   recorded through the service the API and the repair form use (it moves the device back to
   burn-in and dispatches its re-burn-in);
2. **isolates a collective's culprit**: a rack or NVLink-domain collective that failed
   `ISOLATE_AFTER_FAILURES` times while every member passes its own tests is not a member's fault
   anyone can see from the member alone, so re-running it cannot help. The operator stops
   re-dispatching it, starts culprit isolation once no job holds its devices (the same service as
   the dashboard's "Isolate the culprit…" and `fleet isolate`), moves the plan on as its rounds are
   judged, and holds the collective back until the culprit it names has been repaired;
3. **reruns the rest**: every device with a target that has not passed, except those held back by
   step 2 and those waiting for a repair (the service refuses them)."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from datetime import timedelta
from uuid import UUID

from django.db.models import Count, Q
from django.utils import timezone

from fleet.burnin.diagnosis import isolation
from fleet.burnin.models import IsolationPlan, PolicyProgress
from fleet.burnin.reads.failures import attempts_under_current_version
from fleet.burnin.reruns.service import DispatchOutcome, rerun_dispatch
from fleet.core.exceptions import FleetError
from fleet.demo.story import Technician
from fleet.inventory.models import Device, Site
from fleet.jobs.services import JobRefused
from fleet.lifecycle.selectors import repair_entries
from fleet.repairs.services import repair_record
from fleet_rules.explanations import SKIP_EXPLANATIONS
from fleet_rules.vocabulary import DeviceState, IsolationStatus, PlanningMode, RepairRerun, Verdict, WorkflowName

log = logging.getLogger("fleet.demo")

ACTOR = "demo operator"
#: A collective failing this often while its members pass their own tests is isolated, not rerun.
ISOLATE_AFTER_FAILURES = 2
FAILING = (Verdict.FAILED, Verdict.ERRORED)


@dataclass
class DemoOperator:
    technician: Technician
    repair_after: float  # seconds a device waits in needs_repair before the technician comes
    said: set[str] = field(default_factory=set)  # lines said once (a wait, a suspicion)

    def act(self) -> None:
        self.record_repairs()
        for site in Site.objects.order_by("slug"):
            held_back = self.isolate(site)
            self.rerun(site, held_back)

    def once(self, key: str, message: str, *args: object) -> None:
        if key not in self.said:
            self.said.add(key)
            log.info(message, *args)

    # --- 1. repairs ---------------------------------------------------------------------------

    def record_repairs(self) -> None:
        due = timezone.now() - timedelta(seconds=self.repair_after)
        entered = (
            repair_entries()
            .filter(device__state=DeviceState.NEEDS_REPAIR, at__lte=due)
            # a job that held it before it went to repair read the old hardware and still reports it: the
            # technician waits for it to end, as one never pulls a node mid-job
            .exclude(device__job_devices__active=True)
            .select_related("device__site", "device__satellite")
            .order_by("device_id", "-at", "-id")
            .distinct("device_id")
        )
        for change in entered:
            device = change.device
            part = self.technician.swap_gpu(device)
            try:
                recorded = repair_record(
                    device_id=device.id,
                    summary=f"demo technician: swapped GPU {part['slot']} ({change.reason})",
                    parts=[part],
                    rerun=RepairRerun.ALL,
                    actor=ACTOR,
                )
            except FleetError as exc:  # moved meanwhile (an operator on the dashboard): leave it
                log.info("repair of %s/%s not recorded: %s", device.site.slug, device.hostname, exc.detail)
                continue
            skips = recorded.dispatch.plan.skips
            log.info(
                "repair recorded %s/%s: swapped GPU %s (serial %s → %s); burning in again (%s)",
                device.site.slug,
                device.hostname,
                part["slot"],
                part["removed_serial"],
                part["installed_serial"],
                _jobs_phrase(recorded.dispatch)
                if recorded.repair.job_ids or not skips
                else f"not dispatched yet: {skips[0].requirement_name}: {SKIP_EXPLANATIONS[skips[0].reason]}",
            )

    # --- 2. culprit isolation -----------------------------------------------------------------

    def isolate(self, site: Site) -> set[UUID]:
        """Move running plans on, start the ones a failing collective calls for; returns the
        devices whose collective is held back from reruns meanwhile."""
        held_back: set[UUID] = set()
        rows = list(
            PolicyProgress.objects.filter(site=site, topology__isnull=False, verdict__in=FAILING).select_related(
                "topology", "requirement"
            )
        )
        if not rows:
            return held_back
        members = _members({row.topology_id for row in rows if row.topology_id is not None})
        latest = _latest_plans(site, rows)
        attempts = attempts_under_current_version([(r.requirement_id, r.target_id, r.policy_version) for r in rows])
        passing_alone = _passing_alone({d for ids in members.values() for d in ids})
        for row in rows:
            topology, requirement = row.topology, row.requirement
            assert topology is not None
            cohort = members.get(topology.id, set())
            where = f"{site.slug}/{topology.label}"
            plan = latest.get((topology.id, requirement.id))
            if plan is not None and plan.status == IsolationStatus.RUNNING:
                plan = self.advance(site, plan, where)
            if plan is not None and row.finished_at is not None and plan.created_at > row.finished_at:
                # This failure was investigated: hold the collective back while the plan runs and
                # until the culprits it named are repaired, then rerun it.
                if plan.status == IsolationStatus.RUNNING or _culprits_wait_for_repair(plan):
                    held_back |= cohort
                continue
            failures = attempts.get((requirement.id, topology.id), 0)
            if failures < ISOLATE_AFTER_FAILURES or not cohort or not cohort <= passing_alone:
                continue
            held_back |= cohort
            self.once(
                f"suspect {row.id} {row.execution_id}",
                "%s: %s failed %s times while each of its %s devices passes its own tests — re-running it cannot "
                "help; stopping its reruns and isolating the culprit",
                where,
                requirement.name,
                failures,
                len(cohort),
            )
            self.start(site, row, where)
        return held_back

    def start(self, site: Site, row: PolicyProgress, where: str) -> None:
        assert row.topology is not None
        try:
            plan = isolation.isolation_dispatch(
                site=site, topology_id=row.topology.id, requirement_name=row.requirement.name, requested_by=ACTOR
            )
        except JobRefused as exc:
            for job_id, hostnames in exc.holding.items():
                self.once(
                    f"wait {job_id}",
                    "%s: isolation waits for job %s to end (it holds %s of its devices) — /jobs/%s/",
                    where,
                    job_id,
                    len(hostnames),
                    job_id,
                )
            return
        except FleetError as exc:
            self.once(f"refused {row.id} {exc.detail}", "%s: isolation not started: %s", where, exc.detail)
            return
        log.info(
            "%s: isolating the culprit of %s — round 1: %s collective(s), at most %s rounds — /sites/%s/isolation/%s/",
            where,
            row.requirement.name,
            len(plan.rounds[-1]["subsets"]),
            plan.max_rounds,
            site.slug,
            plan.id,
        )

    def advance(self, site: Site, plan: IsolationPlan, where: str) -> IsolationPlan:
        rounds = len(plan.rounds)
        try:
            plan = isolation.isolation_advance(site=site, plan_id=plan.id, requested_by=ACTOR)
        except FleetError as exc:  # e.g. a device held by another job: the next pass tries again
            self.once(f"advance {plan.id} {exc.detail}", "%s: isolation round waits: %s", where, exc.detail)
            return plan
        if plan.status == IsolationStatus.RUNNING and len(plan.rounds) > rounds:
            log.info(
                "%s: isolation round %s: %s collective(s)", where, len(plan.rounds), len(plan.rounds[-1]["subsets"])
            )
        elif plan.status != IsolationStatus.RUNNING:
            data = isolation.plan_data(plan)
            named = sorted(d["hostname"] for d in data["culprits"])
            culprits = ", ".join(named) or "none"
            if plan.status == IsolationStatus.FOUND:
                one = len(named) == 1
                log.info(
                    "%s: %s found in %s rounds: %s %s %s fail; %s to repair, and the collective runs again "
                    "after %s (%s devices were known good) — /sites/%s/isolation/%s/",
                    where,
                    "culprit" if one else f"{len(named)} culprits",
                    len(plan.rounds),
                    culprits,
                    "makes" if one else "make",
                    plan.requirement.name,
                    "it goes" if one else "they go",
                    "its repair" if one else "their repairs",
                    len(data["known_good"]),
                    site.slug,
                    plan.id,
                )
            else:
                log.info(
                    "%s: isolation %s after %s rounds (culprits: %s)", where, plan.status, len(plan.rounds), culprits
                )
        return plan

    # --- 3. reruns ----------------------------------------------------------------------------

    def rerun(self, site: Site, held_back: set[UUID]) -> None:
        waiting = set(
            PolicyProgress.objects.filter(site=site, device__isnull=False)
            .exclude(verdict=Verdict.PASSED)
            .values_list("device_id", flat=True)
        )
        waiting |= set(
            PolicyProgress.objects.filter(site=site, topology__isnull=False)
            .exclude(verdict=Verdict.PASSED)
            .values_list("topology__devices__id", flat=True)
        ) - {None}
        waiting -= held_back
        if not waiting:
            return
        outcome = rerun_dispatch(
            site=site, device_ids=sorted(waiting, key=str), mode=PlanningMode.NON_PASSING, requested_by=ACTOR
        )
        if outcome.created_jobs:
            log.info("rerun at %s: %s", site.slug, _jobs_phrase(outcome))


def _jobs_phrase(outcome: DispatchOutcome) -> str:
    """What a dispatch created, in words a person reads right: "3 jobs: 2 single-device jobs, 1
    collective on rack-a02 (4 devices)"."""
    jobs = outcome.created_jobs
    single = [j for j in jobs if j.workflow_name != WorkflowName.MULTI_NODE_COLLECTIVE]
    collectives = [j for j in jobs if j.workflow_name == WorkflowName.MULTI_NODE_COLLECTIVE]
    parts = []
    if single:
        parts.append(f"{len(single)} single-device job{'s' if len(single) != 1 else ''}")
    for job in collectives:
        label = job.topology.label if job.topology is not None else "a cohort"
        parts.append(f"1 collective on {label} ({len(job.device_ids)} devices)")
    total = len(jobs)
    return f"{total} job{'s' if total != 1 else ''}: {', '.join(parts)}" if parts else "no job"


def _members(topology_ids: set[UUID]) -> dict[UUID, set[UUID]]:
    """Each topology's enrolled devices in burn-in (one query)."""
    members: dict[UUID, set[UUID]] = {}
    rows = Device.objects.filter(memberships__topology_id__in=topology_ids, enrolled_at__isnull=False).values_list(
        "memberships__topology_id", "id"
    )
    for topology_id, device_id in rows:
        members.setdefault(topology_id, set()).add(device_id)
    return members


def _passing_alone(device_ids: set[UUID]) -> set[UUID]:
    """The devices whose every own (single-device) target passed (one query)."""
    counts = (
        PolicyProgress.objects.filter(device_id__in=device_ids)
        .values("device_id")
        .annotate(total=Count("id"), passed=Count("id", filter=Q(verdict=Verdict.PASSED)))
    )
    return {row["device_id"] for row in counts if row["total"] and row["total"] == row["passed"]}


def _latest_plans(site: Site, rows: list[PolicyProgress]) -> dict[tuple[UUID, UUID], IsolationPlan]:
    """The newest isolation plan of each failing collective (one query)."""
    plans = (
        IsolationPlan.objects.filter(
            site=site,
            topology_id__in={r.topology_id for r in rows},
            requirement_id__in={r.requirement_id for r in rows},
        )
        .select_related("topology", "requirement")
        .order_by("topology_id", "requirement_id", "-created_at")
        .distinct("topology_id", "requirement_id")
    )
    return {(p.topology_id, p.requirement_id): p for p in plans}


def _culprits_wait_for_repair(plan: IsolationPlan) -> bool:
    """Whether a culprit the plan named is still in needs_repair (one query)."""
    culprits = plan.state.get("culprits") or []
    return (
        plan.status == IsolationStatus.FOUND
        and Device.objects.filter(id__in=culprits, state=DeviceState.NEEDS_REPAIR).exists()
    )
