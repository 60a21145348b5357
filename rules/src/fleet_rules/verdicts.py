"""What the evidence says about one target, and what to do with its projection row.

Pure functions over small immutable records: no database, so every rule is tested by table. The
records are `NamedTuple`s, not frozen dataclasses: a reconcile builds three of them per target
(6,125 a first sweep of the bench fleet), and a frozen dataclass's `__init__` sets each field
through `object.__setattr__`, about 2.5× the cost of a named tuple's (profiled: 3.5 µs an `Evidence`
of the ~15 µs of Python a page spent per target).
"""

from __future__ import annotations

import enum
from datetime import datetime
from typing import NamedTuple
from uuid import UUID

from fleet_rules.vocabulary import ExecutionStatus, Verdict


class Evidence(NamedTuple):
    """A target's latest execution and its stored evaluation (if any)."""

    execution_id: UUID
    status: str
    updated_at: datetime
    evaluation_passed: bool | None = None
    evaluation_key: str | None = None
    evaluation_for: datetime | None = None
    materialised_at: datetime | None = None
    #: When a pass of this execution stops counting (finished + the requirement's
    #: `evidence_valid_for`); None: never.
    expires_at: datetime | None = None


class Derived(NamedTuple):
    verdict: Verdict
    execution_id: UUID | None
    source_key: str | None
    watermark: datetime | None


def derive_verdict(evidence: Evidence | None, current_key: str, *, now: datetime | None = None) -> Derived | None:
    """The verdict the evidence supports, or None when it is *deferred* (finished, but its
    evaluation for the current `updated_at` and resolution is not materialised yet).

    The watermark orders derivations of one target in time: the deciding evaluation's
    `materialised_at`, or the running execution's `updated_at`. A pass whose `expires_at` is not
    after `now` is `expired` (same execution, key and watermark: only the verdict moves).
    """
    if evidence is None:
        return Derived(Verdict.NOT_RUN, None, None, None)
    if evidence.status == ExecutionStatus.RUNNING:
        return Derived(Verdict.IN_PROGRESS, evidence.execution_id, None, evidence.updated_at)
    current = evidence.evaluation_key == current_key and evidence.evaluation_for == evidence.updated_at
    if not current:
        return None
    if evidence.status == ExecutionStatus.ERRORED:
        verdict = Verdict.ERRORED
    else:
        verdict = Verdict.PASSED if evidence.evaluation_passed else Verdict.FAILED
        if verdict == Verdict.PASSED and is_expired(evidence.expires_at, now):
            verdict = Verdict.EXPIRED
    return Derived(verdict, evidence.execution_id, evidence.evaluation_key, evidence.materialised_at)


class StoredRow(NamedTuple):
    verdict: str
    execution_id: UUID | None
    source_key: str | None
    policy_version: int
    watermark: datetime | None
    in_scope: bool  # it belongs to the scope (site, satellite, resource class, gate) being swept


class RowAction(enum.Enum):
    WRITE = "write"
    #: Same state: nothing to write (counted unchanged). The row is not touched: the scope's sweep
    #: record (`completed_at`) says when a whole sweep last confirmed it, so a steady-state sweep
    #: only reads.
    KEEP = "keep"
    KEEP_NEWER = "keep_newer"  # a concurrent reconcile stored fresher evidence (counted unchanged)


def decide_row(derived: Derived, stored: StoredRow | None, *, policy_version: int) -> RowAction:
    if stored is None:
        return RowAction.WRITE
    same = (
        stored.verdict == derived.verdict
        and stored.execution_id == derived.execution_id
        and stored.source_key == derived.source_key
        and stored.watermark == derived.watermark
        and stored.policy_version == policy_version
        and stored.in_scope
    )
    if same:
        return RowAction.KEEP
    if is_newer(stored.watermark, derived.watermark):
        return RowAction.KEEP_NEWER
    return RowAction.WRITE


def is_expired(expires_at: datetime | None, now: datetime | None) -> bool:
    return expires_at is not None and now is not None and expires_at <= now


def is_newer(stored: datetime | None, derived: datetime | None) -> bool:
    """Null is older than any time; equal is not newer."""
    if stored is None:
        return False
    return derived is None or stored > derived
