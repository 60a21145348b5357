"""The autopilot's writes: one pass over a site (load → `fleet_rules.autopilot.decide` → act through
the existing services: rerun dispatch, culprit isolation, the lifecycle's writer), its log, and an
operator's pause and resume."""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from datetime import datetime
from uuid import UUID

from django.db import transaction
from django.utils import timezone

from fleet.autopilot import metrics
from fleet.autopilot.load import site_facts, site_settings
from fleet.autopilot.models import AutopilotAction, SiteAutopilot
from fleet.burnin.diagnosis import isolation
from fleet.burnin.reruns.service import DispatchOutcome, rerun_dispatch
from fleet.core.exceptions import Conflict, FleetError
from fleet.events.outbox import Draft, events_record
from fleet.inventory.models import Device, Site
from fleet.jobs.services import JobRefused
from fleet.lifecycle.services import AutomaticMove, automatic_moves_apply
from fleet_rules.autopilot import Action, SiteFacts, decide
from fleet_rules.vocabulary import (
    AutopilotActionKind,
    DeviceState,
    EventType,
    IsolationStatus,
    PlanningMode,
    TransitionCause,
)

log = logging.getLogger("fleet.autopilot")

K = AutopilotActionKind
#: Single-device dispatches and reruns of one pass are logged as one line each, naming this many.
NAMED_IN_A_LINE = 3


@dataclass(frozen=True)
class Pass:
    """What one pass over a site did: its facts, what it decided, and what it logged."""

    facts: SiteFacts
    decided: list[Action]
    logged: list[AutopilotAction]


def autopilot_pass(*, site: Site, actor: str, now: datetime | None = None) -> Pass:
    """Decide on the site's facts and act; every action that did something is logged with its
    reason and jobs. An action a service refuses (a device taken meanwhile, a job holding a cohort)
    is left for the next pass: the decision is level-triggered."""
    started = time.perf_counter()
    now = now or timezone.now()
    facts = site_facts(site, now=now)
    decided = decide(facts)
    entries: list[AutopilotAction] = []
    hostnames = _hostnames({d for a in decided for d in a.device_ids})

    def entry(kind: K, devices: list[UUID], reason: str, jobs: list[UUID]) -> AutopilotAction:
        return AutopilotAction(
            site=site,
            at=timezone.now(),
            kind=kind,
            reason=reason,
            device_ids=[str(d) for d in devices],
            hostnames=[hostnames.get(d, str(d)) for d in devices],
            job_ids=[str(j) for j in jobs],
            actor=actor,
        )

    renewals = [a for a in decided if a.kind == K.RENEW]
    if renewals:
        entries += _renew(site, renewals, actor, entry)
    dispatches = [a for a in decided if a.kind in (K.DISPATCH, K.RERUN)]
    if dispatches:
        entries += _dispatch(site, dispatches, actor, entry)
    for action in decided:
        if action.kind == K.ISOLATE:
            entries += _isolate(site, action, actor, entry)
        elif action.kind == K.ADVANCE:
            entries += _advance(site, action, actor, entry)
    if entries:
        AutopilotAction.objects.bulk_create(entries)
        for e in entries:
            log.info("%s", log_line(site, e))
    metrics.pass_observed(facts, entries, time.perf_counter() - started)
    return Pass(facts, decided, entries)


def log_line(site: Site, entry: AutopilotAction) -> str:
    """The entry as the service's log says it: `lon-1/rack-a03: …` for a rack's or domain's
    (its reason starts with the topology's label), `lon-1: …` otherwise, then the jobs."""
    jobs = len(entry.job_ids)
    where = "/" if entry.kind in (K.ISOLATE, K.ADVANCE) or _names_a_topology(entry.reason) else ": "
    said = f"{site.slug}{where}{entry.reason}"
    return f"{said} ({jobs} job{'s' if jobs != 1 else ''})" if jobs else said


def _names_a_topology(reason: str) -> bool:
    label, _, rest = reason.partition(": ")
    return bool(rest) and " " not in label and rest.startswith("its ")


def _dispatch(site: Site, actions: list[Action], actor: str, entry) -> list[AutopilotAction]:
    """Every dispatch and rerun of the pass in one rerun dispatch (one transaction, the planner
    decides the jobs); logged per kind, collectives one line each."""
    wanted = sorted({d for a in actions for d in a.device_ids}, key=str)
    try:
        outcome = rerun_dispatch(site=site, device_ids=wanted, mode=PlanningMode.NON_PASSING, requested_by=actor)
    except FleetError as exc:
        log.info("%s: dispatch of %s devices refused: %s", site.slug, len(wanted), exc.detail)
        return []
    jobs_of = _jobs_by_device(outcome)
    entries = []
    singles: dict[K, list[Action]] = {}
    for action in actions:
        jobs = sorted({j for d in action.device_ids for j in jobs_of.get(d, ())}, key=str)
        if not jobs:
            continue  # the planner skipped it (already dispatched, contended, …): the next pass looks again
        if action.topology_id is not None:
            entries.append(entry(action.kind, list(action.device_ids), action.reason, jobs))
        else:
            singles.setdefault(action.kind, []).append(action)
    for kind, group in singles.items():
        devices = [a.device_ids[0] for a in group]
        jobs = sorted({j for d in devices for j in jobs_of.get(d, ())}, key=str)
        named = "; ".join(a.reason for a in group[:NAMED_IN_A_LINE])
        more = f"; and {len(group) - NAMED_IN_A_LINE} more" if len(group) > NAMED_IN_A_LINE else ""
        what = "burn-in of" if kind == K.DISPATCH else "rerun of"
        entries.append(entry(kind, devices, f"{what} {len(group)} device(s): {named}{more}", jobs))
    return entries


def _renew(site: Site, actions: list[Action], actor: str, entry) -> list[AutopilotAction]:
    """Back to burn-in through the lifecycle's writer (cause `renewal`), then every requirement
    again, in one transaction: a renewal either starts or leaves the device accepted."""
    devices = [a.device_ids[0] for a in actions]
    try:
        with transaction.atomic():
            moved = automatic_moves_apply(
                [
                    AutomaticMove(d, DeviceState.BURN_IN, TransitionCause.RENEWAL, a.reason, {"autopilot": actor})
                    for d, a in zip(devices, actions, strict=True)
                ]
            )
            ids = [m.device_id for m in moved]
            if not ids:
                return []
            outcome = rerun_dispatch(site=site, device_ids=ids, mode=PlanningMode.ALL, requested_by=actor)
    except FleetError as exc:
        log.info("%s: renewal refused: %s", site.slug, exc.detail)
        return []
    jobs_of = _jobs_by_device(outcome)
    by_device = dict(zip(devices, actions, strict=True))
    return [entry(K.RENEW, [d], by_device[d].reason, sorted(jobs_of.get(d, ()), key=str)) for d in ids]


def _isolate(site: Site, action: Action, actor: str, entry) -> list[AutopilotAction]:
    assert action.topology_id is not None and action.requirement_name is not None
    try:
        plan = isolation.isolation_dispatch(
            site=site, topology_id=action.topology_id, requirement_name=action.requirement_name, requested_by=actor
        )
    except (JobRefused, FleetError) as exc:
        log.info("%s: isolation not started: %s", site.slug, getattr(exc, "detail", exc))
        return []
    rounds = plan.rounds[-1]
    jobs = [UUID(str(s["job_id"])) for s in rounds["subsets"] if s.get("job_id")]
    reason = (
        f"{action.reason} — round 1: {len(rounds['subsets'])} collective(s), at most {plan.max_rounds} rounds "
        f"(/sites/{site.slug}/isolation/{plan.id}/)"
    )
    return [entry(K.ISOLATE, list(action.device_ids), reason, jobs)]


def _advance(site: Site, action: Action, actor: str, entry) -> list[AutopilotAction]:
    assert action.plan_id is not None
    before = isolation.IsolationPlan.objects.filter(id=action.plan_id).values_list("rounds", flat=True).first() or []
    try:
        plan = isolation.isolation_advance(site=site, plan_id=action.plan_id, requested_by=actor)
    except FleetError as exc:
        log.info("%s: isolation round waits: %s", site.slug, exc.detail)
        return []
    label = action.reason.split(":", 1)[0]
    if plan.status == IsolationStatus.RUNNING:
        if len(plan.rounds) == len(before):
            return []  # its round is still out
        subsets = plan.rounds[-1]["subsets"]
        jobs = [UUID(str(s["job_id"])) for s in subsets if s.get("job_id")]
        reason = f"{label}: isolation round {len(plan.rounds)}: {len(subsets)} collective(s)"
        return [entry(K.ADVANCE, list(action.device_ids), reason, jobs)]
    data = isolation.plan_data(plan)
    named = sorted(d["hostname"] for d in data["culprits"])
    if plan.status == IsolationStatus.FOUND:
        reason = (
            f"{label}: culprit found in {len(plan.rounds)} rounds: {', '.join(named)} "
            f"{'makes' if len(named) == 1 else 'make'} {action.requirement_name} fail; to repair, and the "
            f"collective runs again after the repair ({len(data['known_good'])} devices known good)"
        )
    else:
        reason = (
            f"{label}: isolation {plan.status} after {len(plan.rounds)} rounds (suspects: {', '.join(named) or 'none'})"
        )
    return [entry(K.ADVANCE, list(action.device_ids), reason, [])]


def _jobs_by_device(outcome: DispatchOutcome) -> dict[UUID, set[UUID]]:
    jobs: dict[UUID, set[UUID]] = {}
    for job in outcome.created_jobs:
        for device_id in job.device_ids:
            jobs.setdefault(device_id, set()).add(job.job_id)
    return jobs


def _hostnames(ids: set[UUID]) -> dict[UUID, str]:
    if not ids:
        return {}
    return dict(Device.objects.filter(id__in=ids).values_list("id", "hostname"))


def defect_record(*, site: Site, actor: str, error: BaseException) -> AutopilotAction:
    """A pass that failed with an unexpected error: said in the log, and the loop goes on."""
    return AutopilotAction.objects.create(
        site=site,
        at=timezone.now(),
        kind=K.DEFECT,
        reason=f"the pass failed ({type(error).__name__}: {error}); the next pass tries again",
        actor=actor,
    )


class AlreadyPaused(Conflict):
    """Pausing a paused autopilot, or resuming a running one (409)."""


@transaction.atomic
def autopilot_pause(*, site: Site, actor: str, reason: str) -> SiteAutopilot:
    """An operator stops the site's autopilot from acting (its running jobs go on)."""
    row = site_settings(site)
    if row.paused_at is not None:
        raise AlreadyPaused(f"The autopilot of {site.slug} is paused already (by {row.paused_by}).")
    row.paused_at, row.paused_by, row.pause_reason = timezone.now(), actor, reason.strip()
    row.save()
    AutopilotAction.objects.create(
        site=site, at=row.paused_at, kind=K.PAUSE, reason=f"paused by {actor}: {reason.strip()}", actor=actor
    )
    _autopilot_event(EventType.AUTOPILOT_PAUSED, site, at=row.paused_at, actor=actor, reason=reason.strip())
    return row


@transaction.atomic
def autopilot_resume(*, site: Site, actor: str) -> SiteAutopilot:
    """An operator lets the site's autopilot act again."""
    row = SiteAutopilot.objects.select_for_update().filter(site=site).first()
    if row is None or row.paused_at is None:
        raise AlreadyPaused(f"The autopilot of {site.slug} is not paused.")
    row.paused_at, row.paused_by, row.pause_reason = None, "", ""
    row.save()
    now = timezone.now()
    AutopilotAction.objects.create(site=site, at=now, kind=K.RESUME, reason=f"resumed by {actor}", actor=actor)
    _autopilot_event(EventType.AUTOPILOT_RESUMED, site, at=now, actor=actor, reason="")
    return row


def _autopilot_event(kind: EventType, site: Site, *, at: datetime, actor: str, reason: str) -> None:
    """The pause or resume as an event (docs/events.md), in the caller's transaction."""
    data = {"site": site.slug, "actor": actor, "links": {"dashboard": f"/sites/{site.slug}/autopilot/"}}
    events_record(
        [Draft(kind, f"sites/{site.slug}/autopilot", site.id, data | ({"reason": reason} if reason else {}))], now=at
    )


#: The settings the fleet file declares (the pause is an operator's, not the file's).
DECLARED = ("enabled", "max_under_test", "rack_share", "backoff", "isolate", "renew_before", "class_limits")


def autopilot_settings_apply(*, site: Site, settings: dict[str, object]) -> bool:
    """The fleet file's settings of the site's autopilot (`DECLARED`); a pause stays. Returns
    whether anything changed. A site with no row and default settings gets none."""
    row = SiteAutopilot.objects.filter(site=site).first()
    if row is None:
        row = SiteAutopilot(site=site)
        if all(getattr(row, k) == v for k, v in settings.items()):
            return False
    elif all(getattr(row, k) == v for k, v in settings.items()):
        return False
    for key, value in settings.items():
        setattr(row, key, value)
    row.save()
    return True


def autopilot_changes(*, site: Site | None, settings: dict[str, object]) -> list[tuple[str, object, object]]:
    """What applying `settings` would change: (setting, now, then), for `--what-if`."""
    row = (SiteAutopilot.objects.filter(site=site).first() if site is not None else None) or SiteAutopilot()
    return [(k, getattr(row, k), v) for k, v in settings.items() if getattr(row, k) != v]
