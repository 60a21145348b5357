"""How a job's status may move: forward only, and never out of a terminal state.

`end_transition` is the one guard every way of ending a job goes through (an agent finishing it,
an operator cancelling it, its lease running out, a dispatch clearing an expired holder).
"""

from __future__ import annotations

import enum
from datetime import datetime

from fleet_rules.vocabulary import ACTIVE_JOB_STATUSES, TERMINAL_JOB_STATUSES, JobStatus


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
