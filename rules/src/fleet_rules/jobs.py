"""How a job's status may move: forward only, and never out of a terminal state; and what a job
came to, in words (`job_outcome`).

`end_transition` is the one guard every way of ending a job goes through (an agent finishing it,
an operator cancelling it, its lease running out, a dispatch clearing an expired holder).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from datetime import datetime

from fleet_rules.vocabulary import ACTIVE_JOB_STATUSES, TERMINAL_JOB_STATUSES, JobStatus, Verdict


class EndTransition(enum.Enum):
    END = "end"  # active → the requested terminal status
    REPEAT = "repeat"  # already ended that way: nothing to do (an idempotent retry)
    REFUSE = "refuse"  # already ended another way: a conflict


def end_transition(current: str, target: JobStatus, *, retry_is_noop: bool) -> EndTransition:
    """What ending a job in status `current` as `target` means. An agent's finish is retried
    when its answer is lost (`retry_is_noop`); an operator cancelling a job that already ended is
    told so."""
    if target not in TERMINAL_JOB_STATUSES:
        raise ValueError(f"{target} is not a way for a job to end")
    if current == target and retry_is_noop:
        return EndTransition.REPEAT
    if current in ACTIVE_JOB_STATUSES:
        return EndTransition.END
    return EndTransition.REFUSE


def lease_expired(*, status: str, lease_expires_at: datetime | None, now: datetime) -> bool:
    """A running job whose agent stopped renewing its lease: whoever ran it is gone."""
    return status == JobStatus.RUNNING and lease_expires_at is not None and lease_expires_at < now


@dataclass(frozen=True)
class JobOutcome:
    """What a job came to, for a reader: a verdict (for its sign) and words. A job's status says
    whether its mechanics ran ("succeeded": the agent ran every test); the outcome says what the
    tests found ("finished — 2 of 2 tests failed")."""

    verdict: Verdict
    words: str


@dataclass(frozen=True)
class JobTally:
    """A job's executions by how they stand (an isolation round's job: its diagnostic runs)."""

    expected: int  # tests it was asked to run: requirements × devices (one per requirement for a collective)
    running: int = 0
    passed: int = 0
    failed: int = 0
    errored: int = 0
    unevaluated: int = 0  # finished, not judged yet

    @property
    def reported(self) -> int:
        return self.passed + self.failed + self.errored + self.unevaluated


def job_outcome(status: str, tally: JobTally) -> JobOutcome:
    """`queued`, `running — 1 of 3 reported`, `cancelled`, `finished — all 3 passed`,
    `finished — 2 of 2 tests failed`, `finished — 1 of 3 not evaluated yet`."""
    expected = max(tally.expected, tally.reported)
    if status == JobStatus.QUEUED:
        return JobOutcome(Verdict.NOT_RUN, JobStatus.QUEUED.value)
    if status == JobStatus.RUNNING:
        return JobOutcome(Verdict.IN_PROGRESS, f"running — {tally.reported} of {expected} reported")
    if status == JobStatus.CANCELLED:
        found = f" — {tally.reported} of {expected} reported" if tally.reported else ""
        return JobOutcome(Verdict.FAILED if tally.failed else Verdict.NOT_RUN, f"cancelled{found}")
    if tally.failed or tally.errored:
        parts = []
        if tally.failed:
            parts.append(f"{tally.failed} of {expected} test{'s' if expected != 1 else ''} failed")
        if tally.errored:
            parts.append(f"{tally.errored} {'of ' + str(expected) + ' ' if not tally.failed else ''}errored")
        return JobOutcome(Verdict.FAILED if tally.failed else Verdict.ERRORED, "finished — " + ", ".join(parts))
    if tally.unevaluated:
        return JobOutcome(Verdict.IN_PROGRESS, f"finished — {tally.unevaluated} of {expected} not evaluated yet")
    if tally.reported < expected:
        return JobOutcome(Verdict.ERRORED, f"finished — only {tally.reported} of {expected} reported")
    return JobOutcome(Verdict.PASSED, "finished — passed" if expected == 1 else f"finished — all {expected} passed")
