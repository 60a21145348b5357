"""What a site's bring-up autopilot does next: the facts of one site in, a list of actions out,
each with its reason in words. Level-triggered (like a Kubernetes controller): the same facts give
the same actions, so a pass that was interrupted is simply done again by the next one.

One pass, in this order:

1. **Nothing** for a site whose autopilot is off or paused by an operator.
2. **Culprit isolation** (`Settings.isolate`): a running plan moves on (`ADVANCE`); a rack or
   NVLink-domain collective that failed `ISOLATE_AFTER_FAILURES` times while every member passes
   its own tests is not a member's fault anyone can see from the member alone, so re-running it
   cannot help: its isolation starts (`ISOLATE`) once none of its devices is under test. While a
   plan runs, and until the culprits it named are repaired, the collective is held back; after a
   plan that named nobody (inconclusive: a cable between two devices, say) too, for a person.
3. **Burn-in** (`DISPATCH`) of eligible devices whose targets have not run, and **reruns**
   (`RERUN`) of failed or errored targets once their backoff has passed (errored sooner than
   failed: the test could not judge the hardware), and a collective whose members all pass alone.
   A device at its policy's `repair_after_failures` goes to repair (the lifecycle's doing) and is
   not dispatched; one whose remediation ladder has a step under way is not rerun (the ladder runs its
   burn-in again after the step: docs/remediation.md).
4. **Renewal** (`RENEW`) of accepted devices not in service whose certificate expires within
   `renew_before`.

Never: a device that is ineligible (`fleet_rules.eligibility`, the API's rule), under test
already (anybody's job, an operator's too), of a resource class whose breaker is open; and never
more than the blast radius (`fleet_rules.blast_radius`) admits. Pure.

**Who gets the slots first** (`admit` takes the units in this order): isolation (it names a
culprit, whose repair is the longest path there is), then reruns (a device failing its way to
repair: the sooner its third failure, the sooner the technician), then the first burn-in of the
devices not yet tested, rack by rack (the first nodes of a rack together), then the collectives
of racks whose members pass alone, then renewals. A device's fault shows only once it has been
tested, and a fault found late adds its whole repair (three failures, the technician's wait, a
re-burn-in, the collective) after everything else: so untested devices go before collectives,
which any free slots run and which hold the slots they wait for against what comes after them.
Measured in bench/README.md (the bring-up part).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from uuid import UUID

from fleet_rules.blast_radius import Placed, Radius, Unit, admit
from fleet_rules.eligibility import is_burn_in_eligible
from fleet_rules.vocabulary import AutopilotActionKind, DeviceState, Verdict

#: A collective failing this often while its members pass their own tests is isolated, not rerun.
ISOLATE_AFTER_FAILURES = 2
#: The wait before rerunning an errored target, as a share of the backoff after a failed one.
ERRORED_BACKOFF_SHARE = 0.25
#: The backoff doubles with each counted attempt, up to this many doublings.
BACKOFF_DOUBLINGS = 4

FAILING = frozenset({Verdict.FAILED, Verdict.ERRORED})
NOT_YET_RUN = frozenset({Verdict.NOT_RUN, Verdict.EXPIRED})
#: Any time: `DeviceFacts` knows whether a device is enrolled, not since when.
_ENROLLED = datetime.min.replace(tzinfo=UTC)


@dataclass(frozen=True)
class Settings:
    """A site's autopilot settings (the fleet file's `autopilot:` of the site)."""

    enabled: bool = False
    max_under_test: int = 64
    rack_share: float = 1.0
    backoff: timedelta = timedelta(minutes=5)
    isolate: bool = True
    renew_before: timedelta = timedelta(days=7)


@dataclass(frozen=True)
class DeviceFacts:
    """One device of the site, as a pass sees it."""

    device_id: UUID
    hostname: str
    resource_class: str
    state: str
    enrolled: bool
    rack: str | None = None
    rack_size: int = 1
    under_test: bool = False  # holds an active job: the autopilot's, an operator's, an isolation round's
    remedying: bool = False  # a remediation ladder step is under way: the ladder reruns it (docs/remediation.md)
    not_run: int = 0  # own targets not run yet (or expired)
    failing: Verdict | None = None  # its worst own target that has not passed: failed before errored
    attempts: int = 0  # counted attempts of that target since the policy's version and the last repair
    last_finished_at: datetime | None = None  # when that target's last attempt ended
    repair_after_failures: int | None = None
    passing_alone: bool = False  # every own target passed
    certificate_valid_until: datetime | None = None  # of its current certificate

    @property
    def eligible(self) -> bool:
        return is_burn_in_eligible(enrolled_at=_ENROLLED if self.enrolled else None, state=self.state)

    @property
    def placed(self) -> Placed:
        return Placed(self.device_id, self.resource_class, self.rack, self.rack_size)


@dataclass(frozen=True)
class PlanFacts:
    """The newest isolation plan of a collective."""

    plan_id: UUID
    running: bool
    created_at: datetime
    culprits_await_repair: bool = False
    #: It ended without naming a device (a fault between devices — a cable —, or a flaky one).
    inconclusive: bool = False


@dataclass(frozen=True)
class CollectiveFacts:
    """A topology target (a rack's or NVLink domain's collective) of the site."""

    topology_id: UUID
    label: str
    requirement_name: str
    verdict: Verdict
    member_ids: tuple[UUID, ...]
    attempts: int = 0
    finished_at: datetime | None = None
    plan: PlanFacts | None = None


@dataclass(frozen=True)
class SiteFacts:
    site_id: UUID
    slug: str
    now: datetime
    settings: Settings
    paused: bool = False
    open_breakers: frozenset[str] = frozenset()  # resource classes
    class_limits: Mapping[str, int] = field(default_factory=dict)
    devices: Sequence[DeviceFacts] = ()
    collectives: Sequence[CollectiveFacts] = ()


@dataclass(frozen=True)
class Action:
    """One thing to do, with why, in words a person reads in the log."""

    kind: AutopilotActionKind
    device_ids: tuple[UUID, ...]
    reason: str
    topology_id: UUID | None = None
    requirement_name: str | None = None
    plan_id: UUID | None = None


def backoff_for(settings: Settings, verdict: Verdict, attempts: int) -> timedelta:
    """The wait after an attempt of a target before the next: doubling with each attempt,
    errored ones a quarter of failed ones."""
    wait: timedelta = settings.backoff * 2 ** max(0, min(attempts, BACKOFF_DOUBLINGS + 1) - 1)
    return wait * ERRORED_BACKOFF_SHARE if verdict == Verdict.ERRORED else wait


def radius_of(facts: SiteFacts) -> Radius:
    return Radius(facts.settings.max_under_test, facts.settings.rack_share, facts.class_limits)


def decide(facts: SiteFacts) -> list[Action]:
    """The site's actions this pass (see the module's docstring)."""
    settings = facts.settings
    if not settings.enabled or facts.paused:
        return []
    devices = {d.device_id: d for d in facts.devices}
    usable = {
        d.device_id
        for d in facts.devices
        if d.eligible and not d.under_test and d.resource_class not in facts.open_breakers
    }
    under_test = [d.placed for d in facts.devices if d.under_test]
    held_back: set[UUID] = set()
    wanted: list[tuple[Unit, Action]] = []

    for collective in sorted(facts.collectives, key=lambda c: (c.label, c.requirement_name)):
        members = [devices[m] for m in collective.member_ids if m in devices]
        cohort = {m.device_id for m in members}
        plan = collective.plan
        investigated = (
            plan is not None and collective.finished_at is not None and plan.created_at > collective.finished_at
        )
        if plan is not None and plan.running:
            held_back |= cohort
            running = {m.device_id for m in members if m.under_test and m.resource_class not in facts.open_breakers}
            if settings.isolate and cohort <= usable | running:
                wanted.append(
                    (
                        Unit(tuple(m.placed for m in members if not m.under_test), whole_rack=True),
                        Action(
                            AutopilotActionKind.ADVANCE,
                            tuple(sorted(cohort, key=str)),
                            f"{collective.label}: culprit isolation of {collective.requirement_name} is running: "
                            "judging its round and dispatching the next",
                            collective.topology_id,
                            collective.requirement_name,
                            plan.plan_id,
                        ),
                    )
                )
            continue
        if investigated and plan is not None and (plan.culprits_await_repair or plan.inconclusive):
            # Awaiting the named culprit's repair; or isolation could not name a device (a cable
            # between two, say): rerunning cannot help either, a person looks (their rerun, or a
            # new failure after it, starts the story again).
            held_back |= cohort
            continue
        if (
            settings.isolate
            and not investigated
            and collective.verdict in FAILING
            and collective.attempts >= ISOLATE_AFTER_FAILURES
            and members
            and all(m.passing_alone for m in members)
        ):
            held_back |= cohort
            if cohort <= usable:
                wanted.append(
                    (
                        Unit(tuple(m.placed for m in members), whole_rack=True),
                        Action(
                            AutopilotActionKind.ISOLATE,
                            tuple(sorted(cohort, key=str)),
                            f"{collective.label}: {collective.requirement_name} failed {collective.attempts} times "
                            f"while its {len(members)} nodes passed in-node tests — re-running it cannot help: "
                            "isolating the culprit",
                            collective.topology_id,
                            collective.requirement_name,
                        ),
                    )
                )
            continue
        if collective.verdict == Verdict.PASSED or not members or not all(m.passing_alone for m in members):
            continue  # a collective runs once its members pass alone: their own reruns come first
        if collective.verdict not in FAILING and collective.verdict not in NOT_YET_RUN:
            # In progress: it runs, or it ran and awaits its evaluation (its job ended, so its
            # members are free). Running it again would spend a whole rack's slots on a result on
            # its way (real agents evaluate and sweep a few seconds after a job ends).
            held_back |= cohort
            continue
        if collective.verdict in FAILING and collective.finished_at is not None:
            due = collective.finished_at + backoff_for(settings, collective.verdict, collective.attempts)
            if due > facts.now:
                held_back |= cohort
                continue
        if not cohort <= usable:
            continue
        held_back |= cohort
        first = collective.verdict in NOT_YET_RUN
        wanted.append(
            (
                Unit(tuple(m.placed for m in members), whole_rack=True),
                Action(
                    AutopilotActionKind.DISPATCH if first else AutopilotActionKind.RERUN,
                    tuple(sorted(cohort, key=str)),
                    f"{collective.label}: its {len(members)} nodes pass alone; "
                    + (
                        f"running {collective.requirement_name}"
                        if first
                        else f"{collective.requirement_name} {collective.verdict} "
                        f"{collective.attempts} time(s): running it again"
                    ),
                    collective.topology_id,
                    collective.requirement_name,
                ),
            )
        )

    singles: list[tuple[Unit, Action]] = []
    reruns: list[tuple[Unit, Action]] = []
    renewals: list[tuple[Unit, Action]] = []
    for device in sorted(facts.devices, key=lambda d: (d.rack is None, d.rack or "", d.hostname)):
        if device.device_id not in usable or device.device_id in held_back:
            continue
        if device.not_run:
            singles.append(
                (
                    Unit((device.placed,)),
                    Action(
                        AutopilotActionKind.DISPATCH,
                        (device.device_id,),
                        f"{device.hostname}: {device.not_run} requirement(s) not run yet",
                    ),
                )
            )
            continue
        if device.failing is None or device.last_finished_at is None or device.remedying:
            continue  # nothing failing, or the remediation ladder drives its rerun
        limit = device.repair_after_failures
        if limit is not None and device.attempts >= limit:
            continue  # at the repair limit: the lifecycle sends it to repair, not another run
        if device.last_finished_at + backoff_for(settings, device.failing, device.attempts) > facts.now:
            continue
        reruns.append(
            (
                Unit((device.placed,)),
                Action(
                    AutopilotActionKind.RERUN,
                    (device.device_id,),
                    f"{device.hostname}: a target {device.failing} {device.attempts} time(s)"
                    + (f" of {limit}" if limit else "")
                    + ": running it again after its backoff",
                ),
            )
        )
    for device in sorted(facts.devices, key=lambda d: d.hostname):
        expires = device.certificate_valid_until
        if (
            device.state == DeviceState.ACCEPTED
            and device.enrolled
            and not device.under_test
            and device.resource_class not in facts.open_breakers
            and expires is not None
            and expires - facts.now <= settings.renew_before
        ):
            renewals.append(
                (
                    Unit((device.placed,)),
                    Action(
                        AutopilotActionKind.RENEW,
                        (device.device_id,),
                        f"{device.hostname}: its certificate expires {expires:%Y-%m-%d %H:%M} UTC, within "
                        f"{_days(settings.renew_before)}, and it is not in service: burning it in again",
                    ),
                )
            )
    isolating = [c for c in wanted if c[1].kind in (AutopilotActionKind.ISOLATE, AutopilotActionKind.ADVANCE)]
    collectives = [c for c in wanted if c[1].kind not in (AutopilotActionKind.ISOLATE, AutopilotActionKind.ADVANCE)]
    candidates = isolating + reruns + singles + collectives + renewals
    admitted = {id(u) for u in admit([u for u, _ in candidates], under_test=under_test, radius=radius_of(facts))}
    return [action for unit, action in candidates if id(unit) in admitted or _judges_only(action, unit)]


def _judges_only(action: Action, unit: Unit) -> bool:
    """An isolation round whose devices are all under test still runs: it only judges and waits."""
    return action.kind == AutopilotActionKind.ADVANCE and not unit.devices


def _days(span: timedelta) -> str:
    days = span.total_seconds() / 86400
    return f"{days:g} days" if days >= 1 else f"{span.total_seconds() / 3600:g} h"
