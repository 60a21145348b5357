"""A reconcile page (load → derive each target's verdict → write), its signed cursor, and
`reconcile_sweep`: every page of one scope, as the CLI, the benchmark and the tests run it."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any
from uuid import UUID

from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from fleet.burnin import metrics
from fleet.burnin.certificates.issuance import certificates_refresh
from fleet.burnin.reconcile.load import ReconcileScope, TargetRow, count_targets, load_page, reconcile_scope_load
from fleet.burnin.reconcile.write import SweepRecord, Written, cleanup, page_write, sweep_record
from fleet.burnin.repair_due import FailureCount, counted_failures_judge
from fleet.core.cursors import cursor_decode, cursor_encode
from fleet.inventory.identity import Actor
from fleet_rules.attempts import require_consecutive
from fleet_rules.verdicts import Derived, RowAction, decide_row, derive_verdict

logger = logging.getLogger("fleet.reconcile")

RESTART = "Restart the sweep without a cursor."


@dataclass
class ReconcilePage:
    """The spec's response: this page's counters, the sweep's size, and where to go on."""

    written: int = 0
    unchanged: int = 0
    deferred: int = 0
    deleted: int = 0
    guard_tripped: bool = False
    next_cursor: str | None = None
    target_count: int = 0


#: What a sweep has counted so far, carried (signed) from page to page in the cursor: the
#: counters for the scope's sweep record and the rows in scope for the deletion guard.
TALLIES = ("written", "unchanged", "deferred", "rows")


@dataclass(frozen=True)
class SweepState:
    target_count: int
    started_at: datetime
    after: tuple[str, UUID] | None
    tallies: dict[str, int] = field(default_factory=lambda: dict.fromkeys(TALLIES, 0))


def _cursor_payload(
    scope: ReconcileScope, state: SweepState, last: TargetRow, tallies: dict[str, int]
) -> dict[str, Any]:
    return {
        "site": str(scope.site_id),
        "satellite": str(scope.satellite.id),
        "rc": scope.resource_class,
        "gate": scope.gate,
        "version": scope.policy.version,
        "started_at": state.started_at.isoformat(),
        "target_count": state.target_count,
        "after": [last.requirement_name, str(last.target_id)],
        "tallies": tallies,
    }


def sweep_state(scope: ReconcileScope, cursor: str | None) -> SweepState:
    """A new sweep (count its targets) or the one a cursor continues (refusing a cursor that is
    forged, belongs to another scope, or predates a policy change)."""
    if not cursor:
        return SweepState(count_targets(scope), timezone.now(), None)
    payload = cursor_decode(cursor, purpose="reconcile", restart_hint=RESTART)
    same_scope = (payload.get("site"), payload.get("satellite"), payload.get("rc"), payload.get("gate")) == (
        str(scope.site_id),
        str(scope.satellite.id),
        scope.resource_class,
        scope.gate,
    )
    if not same_scope:
        raise ValidationError({"cursor": [f"This cursor belongs to another sweep scope. {RESTART}"]})
    if payload.get("version") != scope.policy.version:
        raise ValidationError(
            {
                "cursor": [
                    f"The acceptance policy for {scope.resource_class} changed (version {payload.get('version')} → "
                    f"{scope.policy.version}) since this sweep started. {RESTART}"
                ]
            }
        )
    name, target = payload["after"]
    started_at = parse_datetime(payload["started_at"])
    assert started_at is not None  # we signed it
    tallies = payload.get("tallies") or {}
    return SweepState(
        int(payload["target_count"]), started_at, (name, UUID(target)), {k: int(tallies.get(k, 0)) for k in TALLIES}
    )


@transaction.atomic
def progress_reconcile_page(*, scope: ReconcileScope, limit: int, cursor: str | None) -> ReconcilePage:
    state = sweep_state(scope, cursor)
    loaded = load_page(scope, state.after, limit)
    targets = loaded.targets
    page = ReconcilePage(target_count=state.target_count)

    to_store: list[tuple[TargetRow, Derived]] = []
    kept_in_scope = 0  # stored rows of this scope the page leaves as they are
    now = timezone.now()  # a pass older than its requirement's `evidence_valid_for` is expired
    current_keys, version = scope.current_keys, scope.policy.version
    for target in targets:
        derived = require_consecutive(
            derive_verdict(target.evidence, current_keys[target.requirement_id], now=now),
            k=target.consecutive_passes,
            latest_counts=target.latest_counts,
            prior=target.prior,
        )
        if derived is None:
            page.deferred += 1
            kept_in_scope += target.stored_in_scope
            continue
        action = decide_row(derived, target.stored, policy_version=version)
        if action is not RowAction.WRITE:  # the same state, or a fresher one a concurrent sweep stored
            page.unchanged += 1
            kept_in_scope += target.stored_in_scope
            continue
        to_store.append((target, derived))
    written = page_write(scope, to_store, orphans=loaded.orphans, started_at=state.started_at)
    _certificates_refresh(scope, written)
    page.written = len(written.rows)
    page.unchanged += len(to_store) - len(written.rows)

    tallies = dict(state.tallies)
    tallies["written"] += page.written
    tallies["unchanged"] += page.unchanged
    tallies["deferred"] += page.deferred
    tallies["rows"] += kept_in_scope + len(to_store) + len(loaded.orphans)
    if loaded.has_more:
        page.next_cursor = cursor_encode(_cursor_payload(scope, state, targets[-1], tallies), purpose="reconcile")
        _page_counted(scope, page)
        return page
    page.deleted, page.guard_tripped = cleanup(scope, started_at=state.started_at, rows_in_scope=tallies["rows"])
    sweep_record(
        scope,
        SweepRecord(
            started_at=state.started_at,
            target_count=state.target_count,
            written=tallies["written"],
            unchanged=tallies["unchanged"],
            deferred=tallies["deferred"],
            deleted=page.deleted,
            guard_tripped=page.guard_tripped,
        ),
    )
    if state.target_count == 0:
        logger.warning("reconcile of %s: the policy governs no target (target_count 0)", scope.describe())
    _page_counted(scope, page)
    return page


def _page_counted(scope: ReconcileScope, page: ReconcilePage) -> None:
    satellite = scope.satellite
    metrics.reconcile_page_counted(
        site=satellite.site.slug, satellite=satellite.name, resource_class=scope.resource_class, page=page
    )


def _certificates_refresh(scope: ReconcileScope, written: Written) -> None:
    """Issue or supersede the certificates of the devices whose rows this page wrote (of a
    topology row: every device in the topology), and send to repair the devices whose targets it
    wrote as failed too often (their failures counted by the write itself), in the page's
    transaction."""
    certificates_refresh(
        device_ids={t.device_id for t, _ in written.rows if t.device_id is not None},
        topology_ids={t.topology_id for t, _ in written.rows if t.topology_id is not None},
    )
    counted_failures_judge(
        FailureCount(
            device_id=t.device_id,
            requirement_id=t.requirement_id,
            requirement_name=t.requirement_name,
            failures=failures,
            repair_after_failures=scope.policy.repair_after_failures,
            last_execution_id=d.execution_id,
            repaired_at=repaired_at,
        )
        for t, d, failures, repaired_at in written.failed
        if t.device_id is not None
    )


# --- whole sweeps --------------------------------------------------------------------------------

#: A sweep whose policy keeps changing under it gives up after this many restarts.
MAX_RESTARTS = 3
#: Pages a sweep may take beyond what its `target_count` fills (targets enrolled mid-sweep).
PAGE_SLACK = 10


@dataclass
class SweepTotals:
    """A whole sweep: its size, every page's counters added up, and every page as returned."""

    target_count: int = 0
    written: int = 0
    unchanged: int = 0
    deferred: int = 0
    deleted: int = 0
    guard_tripped: bool = False
    restarts: int = 0
    pages: list[ReconcilePage] = field(default_factory=list)

    def add(self, page: ReconcilePage) -> None:
        self.pages.append(page)
        self.target_count = page.target_count
        self.written += page.written
        self.unchanged += page.unchanged
        self.deferred += page.deferred
        self.deleted += page.deleted
        self.guard_tripped |= page.guard_tripped

    @property
    def seen(self) -> int:
        return self.written + self.unchanged + self.deferred


class SweepStuck(RuntimeError):
    """The cursor did not advance: more pages than the sweep's targets can fill."""


PageFetcher = Callable[[str | None], ReconcilePage]


def page_fetcher(
    *, site_slug: str, satellite_name: str, resource_class: str, gate: str | None, limit: int, actor: Actor
) -> PageFetcher:
    """Fetch pages in-process as the view does: the scope loaded again for every page."""

    def fetch(cursor: str | None) -> ReconcilePage:
        scope = reconcile_scope_load(
            site_slug=site_slug, satellite_name=satellite_name, resource_class=resource_class, gate=gate, actor=actor
        )
        return progress_reconcile_page(scope=scope, limit=limit, cursor=cursor)

    return fetch


def reconcile_sweep(
    *,
    site_slug: str,
    satellite_name: str,
    resource_class: str,
    gate: str | None = None,
    limit: int = 500,
    actor: Actor = None,
    fetch_page: PageFetcher | None = None,
    on_page: Callable[[SweepTotals], None] | None = None,
) -> SweepTotals:
    """Run one scope's sweep to its final page. Each page is fetched as an agent would (scope
    loaded again, then the page; `fetch_page` may send it over HTTP instead); a sweep whose
    cursor is refused because the policy changed starts over (at most `MAX_RESTARTS` times); a
    sweep needing more pages than its targets can fill raises `SweepStuck`."""
    fetch = fetch_page or page_fetcher(
        site_slug=site_slug,
        satellite_name=satellite_name,
        resource_class=resource_class,
        gate=gate,
        limit=limit,
        actor=actor,
    )
    totals, cursor = SweepTotals(), None
    while True:
        try:
            page = fetch(cursor)
        except ValidationError as exc:
            refused = cursor is not None and "cursor" in getattr(exc, "message_dict", {})
            if not refused or totals.restarts >= MAX_RESTARTS:
                raise
            totals = SweepTotals(restarts=totals.restarts + 1)
            cursor = None
            continue
        totals.add(page)
        if on_page is not None:
            on_page(totals)
        if page.next_cursor is None:
            return totals
        if len(totals.pages) > page.target_count // max(limit, 1) + PAGE_SLACK:
            raise SweepStuck(f"{len(totals.pages)} pages for {page.target_count} targets at limit {limit}")
        cursor = page.next_cursor
