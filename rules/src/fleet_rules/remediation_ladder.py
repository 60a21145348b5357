"""The remediation ladder: which step a device takes next for what its events ask, given the steps it already took.

A device whose events ask for a GPU reset or a reboot (`fleet_rules.xid_correlation`) is not sent to repair: it
takes the step, then runs its burn-in again. The ladder allows each step a number of times within a window
(`LadderPolicy`; one reset and one reboot in 24 h by default, as NVSentinel resets a single GPU, under 2 min,
before it reboots a node, about 20 min: docs/designs/019-janitor-gpu-reset.md). A step whose allowance is spent
gives the next one up; when none is left — or the catalogue asks for `repair` — the device goes to
`needs_repair`, and the reason names the ladder taken ("GPU reset at 14:02Z: persisted; reboot at 14:31Z:
persisted"). A step not yet finished stops the ladder: nothing more is asked until it ends. Pure: no Django.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from fleet_rules.eligibility import is_burn_in_eligible
from fleet_rules.vocabulary import RemedyOutcome, XidResolution

__all__ = [
    "DEFAULT_POLICY",
    "LADDER_STEPS",
    "OUTCOME_WORDS",
    "STEP_NAMES",
    "LadderDecision",
    "LadderPolicy",
    "TakenStep",
    "device_ladder_next",
    "ladder_next",
    "ladder_sentence",
]

R = XidResolution
#: The steps the ladder can take on a node, weakest first.
LADDER_STEPS: tuple[XidResolution, ...] = (R.RESET_GPU, R.REBOOT)
STEP_NAMES: Mapping[XidResolution, str] = {R.RESET_GPU: "GPU reset", R.REBOOT: "reboot"}
#: A step's outcome as pages show it: a sign beside the word, never colour alone.
OUTCOME_WORDS: Mapping[RemedyOutcome, str] = {
    RemedyOutcome.UNDER_WAY: "◷ under way",
    RemedyOutcome.CURED: "✓ cured",
    RemedyOutcome.PERSISTED: "✗ persisted",
    RemedyOutcome.FAILED: "! failed",
}


@dataclass(frozen=True, slots=True)
class LadderPolicy:
    """How many times each step may be taken within `window` (0: never: the ladder skips it)."""

    allowed: Mapping[XidResolution, int] = field(default_factory=lambda: {R.RESET_GPU: 1, R.REBOOT: 1})
    window: timedelta = timedelta(hours=24)


DEFAULT_POLICY = LadderPolicy()


def _iso(moment: datetime) -> str:
    return moment.astimezone(UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


@dataclass(frozen=True, slots=True)
class TakenStep:
    """A step the device took (or was asked to take): when it was asked, and how it ended."""

    step: XidResolution
    at: datetime
    outcome: RemedyOutcome

    def sentence(self) -> str:
        return (
            f"{STEP_NAMES.get(self.step, self.step.value)} at {_iso(self.at)}: {self.outcome.value.replace('_', ' ')}"
        )

    def as_json(self) -> dict[str, Any]:
        return {
            "step": self.step.value,
            "at": self.at.isoformat().replace("+00:00", "Z"),
            "outcome": self.outcome.value,
        }


@dataclass(frozen=True, slots=True)
class LadderDecision:
    """What the device does next: `action` is `reset_gpu` or `reboot` (take it), `repair` (needs_repair), or the
    asked step when the ladder has nothing to do with it (`none`, `restart_app`); `waiting` when a step is
    pending. `ladder` is every step taken within the window, oldest first."""

    action: XidResolution
    reason: str
    ladder: tuple[TakenStep, ...] = ()
    waiting: bool = False

    @property
    def exhausted(self) -> bool:
        return self.action is R.REPAIR and bool(self.ladder)


def ladder_sentence(ladder: Sequence[TakenStep]) -> str:
    return "; ".join(step.sentence() for step in ladder)


def ladder_next(
    *, asked: XidResolution, taken: Sequence[TakenStep], now: datetime, policy: LadderPolicy = DEFAULT_POLICY
) -> LadderDecision:
    """The next step for `asked` (the correlation rule's step), given the device's `taken` steps (any age)."""
    recent = tuple(sorted((t for t in taken if t.at >= now - policy.window), key=lambda t: t.at))
    if asked in (R.NONE, R.RESTART_APP):
        return LadderDecision(asked, "", recent)
    if asked is R.REPAIR:  # the catalogue's, or a repeat's escalation (the judgement says which): no step helps
        return LadderDecision(R.REPAIR, f"the ladder taken: {ladder_sentence(recent)}" if recent else "", recent)
    if any(t.outcome is RemedyOutcome.UNDER_WAY for t in recent):
        return LadderDecision(R.NONE, "a remediation step is under way", recent, waiting=True)
    for step in LADDER_STEPS[LADDER_STEPS.index(asked) :]:
        used = sum(1 for t in recent if t.step is step)
        if used < policy.allowed.get(step, 0):
            return LadderDecision(step, f"{STEP_NAMES[step]} asked", recent)
    hours = f"{policy.window.total_seconds() / 3600:g} h"
    said = f"the ladder is exhausted in {hours}"
    return LadderDecision(R.REPAIR, f"{said}: {ladder_sentence(recent)}" if recent else said, recent)


def device_ladder_next(
    *,
    asked: XidResolution,
    taken: Sequence[TakenStep],
    now: datetime,
    enrolled_at: datetime | None,
    state: str,
    policy: LadderPolicy = DEFAULT_POLICY,
) -> LadderDecision:
    """`ladder_next` for a device as it is: a step asked of a device no burn-in job can hold (an accepted one)
    cannot be taken, and it goes to repair instead, saying why (the lifecycle's table says whether it may move)."""
    decision = ladder_next(asked=asked, taken=taken, now=now, policy=policy)
    if decision.action in LADDER_STEPS and not is_burn_in_eligible(enrolled_at=enrolled_at, state=state):
        said = f"{STEP_NAMES[decision.action]} asked, but no burn-in job can hold a device {state}"
        return LadderDecision(R.REPAIR, said, decision.ladder)
    return decision
