"""Phase 2, reconcile: full sweeps of one satellite's scope, page by page exactly as the view
runs them (scope load + one page per request), at two page sizes.

The first sweep starts from an empty projection (every target written or deferred); the second
finds every row already right (unchanged), which is the steady state an agent lives in. An
unchanged row still goes through the page's upsert (its `reconciled_at` is bumped), so the
second sweep writes as many rows as the first.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial

from django.db import connection

from bench.clients import AgentClient, encode
from bench.seed import RESOURCE_CLASS, Fleet
from bench.timing import CHEAP_SECONDS, QueryLog
from fleet.burnin.reconcile import progress_reconcile_page, reconcile_scope_load

LIMITS = (500, 100)
URL = "/api/v1/burn-in/policy-progress/reconcile/"
COUNTERS = ("written", "unchanged", "deferred", "deleted")


@dataclass
class Sweep:
    seconds: float = 0.0
    pages: int = 0
    target_count: int = 0
    counters: dict[str, int] = field(default_factory=lambda: dict.fromkeys(COUNTERS, 0))
    queries: list[int] = field(default_factory=list)  # per page

    def describe_queries(self) -> str:
        """First page / every page in between / final page: the middle must be one number."""
        if not self.queries:
            return "–"
        if len(self.queries) == 1:
            return str(self.queries[0])
        middle = self.queries[1:-1]
        between = (
            "–"
            if not middle
            else str(middle[0])
            if min(middle) == max(middle)
            else f"{min(middle)}–{max(middle)} (varies!)"
        )
        return f"{self.queries[0]} / {between} / {self.queries[-1]}"


@dataclass
class ReconcileRow:
    path: str
    limit: int
    first: Sweep
    second: Sweep
    runs: int
    problems: list[str] = field(default_factory=list)


def _service_page(fleet: Fleet, limit: int, cursor: str | None) -> dict:
    scope = reconcile_scope_load(
        site_slug=fleet.site.slug,
        satellite_name=fleet.satellite.name,
        resource_class=RESOURCE_CLASS,
        gate=None,
        actor=None,
    )
    return vars(progress_reconcile_page(scope=scope, limit=limit, cursor=cursor))


def _http_page(client: AgentClient) -> Callable[[Fleet, int, str | None], dict]:
    def page(fleet: Fleet, limit: int, cursor: str | None) -> dict:
        body = {
            "site_slug": fleet.site.slug,
            "satellite_name": fleet.satellite.name,
            "resource_class": RESOURCE_CLASS,
            "limit": limit,
        }
        if cursor:
            body["cursor"] = cursor
        return client.post_json(URL, encode(body))

    return page


def _sweep(page: Callable[[Fleet, int, str | None], dict], fleet: Fleet, limit: int) -> Sweep:
    sweep = Sweep()
    queries = QueryLog(sweep.queries)
    cursor = None
    start = time.perf_counter()
    while True:
        result = queries.call(partial(page, fleet, limit, cursor))
        sweep.pages += 1
        sweep.target_count = result["target_count"]
        for name in COUNTERS:
            sweep.counters[name] += result[name]
        cursor = result["next_cursor"]
        if not cursor:
            break
    sweep.seconds = time.perf_counter() - start
    return sweep


def _truncate() -> None:
    with connection.cursor() as cursor:
        cursor.execute("TRUNCATE burnin_policyprogress")


def _check(row: ReconcileRow, fleet: Fleet) -> None:
    for label, sweep in (("first", row.first), ("second", row.second)):
        c = sweep.counters
        if sweep.target_count != fleet.target_count:
            row.problems.append(
                f"{row.path} limit {row.limit}: target_count {sweep.target_count}, built {fleet.target_count}"
            )
        if c["written"] + c["unchanged"] + c["deferred"] != sweep.target_count:
            row.problems.append(
                f"{row.path} limit {row.limit} {label} sweep: counters {c} do not add up to {sweep.target_count}"
            )
    if row.second.counters["written"]:
        row.problems.append(
            f"{row.path} limit {row.limit}: the second sweep wrote {row.second.counters['written']} rows"
        )


def _median(sweeps: list[Sweep]) -> Sweep:
    return sorted(sweeps, key=lambda s: s.seconds)[len(sweeps) // 2]


def _measure(path: str, page, fleet: Fleet, limit: int, runs: int) -> ReconcileRow:
    """Pairs of sweeps (from an empty projection, then again), repeated only while cheap."""
    firsts: list[Sweep] = []
    seconds: list[Sweep] = []
    while len(firsts) < runs:
        _truncate()
        firsts.append(_sweep(page, fleet, limit))
        seconds.append(_sweep(page, fleet, limit))
        if firsts[0].seconds + seconds[0].seconds > 2 * CHEAP_SECONDS:
            break
    row = ReconcileRow(path, limit, _median(firsts), _median(seconds), runs=len(firsts))
    _check(row, fleet)
    return row


def reconcile_measure(
    fleet: Fleet, *, runs: int, http: AgentClient | None, progress: Callable[[str], None]
) -> list[ReconcileRow]:
    """Service sweeps at each limit; with `http`, also one sweep pair through the view."""
    rows = []
    for limit in LIMITS:
        progress(f"reconcile service, limit {limit}")
        rows.append(_measure("service", _service_page, fleet, limit, runs))
    if http is not None:
        progress("reconcile HTTP, limit 500")
        rows.append(_measure("HTTP", _http_page(http), fleet, 500, runs))
    # Leave the projection complete: rerun planning reads it.
    return rows
