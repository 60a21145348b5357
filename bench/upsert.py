"""Phase 1, evaluation-results upsert: items/s per batch size through the service and through
the HTTP view, and the queries each request sends (which must not grow with the batch).

Three modes per batch size, each over the same executions:
- insert: no stored results yet (every item written by INSERT);
- replace: a re-evaluation with a different payload (every item written by ON CONFLICT UPDATE);
- replay: the same request again (every item unchanged, nothing written).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from django.db import connection

from bench.clients import AgentClient, encode
from bench.seed import Fleet, LatestExecution, evaluation_payload
from bench.timing import QueryLog, Timing, timed
from fleet.burnin.evaluation_results.service import evaluation_results_upsert
from fleet_rules.evaluations import ResultItem

BATCHES = (1, 100, 500, 1000)
ITEMS_PER_SCALE = 10_000  # per mode and batch size; the default run must stay under about 3 min
SINGLE_ITEM_REQUESTS = 200  # batch 1 measures per-request overhead; a few hundred requests show it
URL = "/api/v1/burn-in/evaluations/results/"
MODES = ("insert", "replace", "replay")


@dataclass
class ModeResult:
    timing: Timing
    queries: QueryLog
    last_variant: int


@dataclass
class UpsertRow:
    path: str
    batch: int
    items: int
    modes: dict[str, ModeResult] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)


def _payload(execution: LatestExecution, variant: int) -> dict[str, Any]:
    """Variant 1 differs from variant 0 only in its reason: a re-evaluation the service must store."""
    payload = evaluation_payload(execution)
    if variant:
        payload["reason"] = f"{payload['reason'] or 'all thresholds met'} (re-evaluated)"
    return payload


def _truncate() -> None:
    with connection.cursor() as cursor:
        cursor.execute("TRUNCATE burnin_evaluationresult")


class _Path:
    """One way of posting a batch (the service function, or HTTP), with its requests prepared
    before the clock starts."""

    name: str
    requests: int = 0

    def prepare(self, fleet: Fleet, executions: Sequence[LatestExecution], batch: int) -> None:
        raise NotImplementedError

    def post(self, variant: int, index: int) -> dict[str, int]:
        raise NotImplementedError


class ServicePath(_Path):
    name = "service"

    def prepare(self, fleet: Fleet, executions: Sequence[LatestExecution], batch: int) -> None:
        self.batches = [
            [
                [
                    ResultItem(e.id, _payload(e, variant), fleet.keys[e.spec.requirement.id], e.updated_at)
                    for e in executions[start : start + batch]
                ]
                for start in range(0, len(executions), batch)
            ]
            for variant in (0, 1)
        ]
        self.requests = len(self.batches[0])

    def post(self, variant: int, index: int) -> dict[str, int]:
        return vars(evaluation_results_upsert(items=self.batches[variant][index], actor=None))


class HttpPath(_Path):
    name = "HTTP"

    def __init__(self, client: AgentClient) -> None:
        self.client = client

    def prepare(self, fleet: Fleet, executions: Sequence[LatestExecution], batch: int) -> None:
        def item(e: LatestExecution, variant: int) -> dict[str, Any]:
            return {
                "execution_id": str(e.id),
                "evaluation_result": _payload(e, variant),
                "evaluation_source_key": fleet.keys[e.spec.requirement.id],
                "expected_updated_at": e.updated_at.isoformat(),
            }

        self.bodies = [
            [
                encode({"results": [item(e, variant) for e in executions[start : start + batch]]})
                for start in range(0, len(executions), batch)
            ]
            for variant in (0, 1)
        ]
        self.requests = len(self.bodies[0])

    def post(self, variant: int, index: int) -> dict[str, int]:
        return self.client.post_json(URL, self.bodies[variant][index])


def _mode(
    row: UpsertRow,
    path: _Path,
    mode: str,
    variants: tuple[int, ...],
    runs: int,
    before: Callable[[], object] | None = None,
) -> ModeResult:
    """Post every batch once per run, cycling through `variants` run by run (so each replace
    run really changes what the previous run stored); count each request's queries."""
    queries = QueryLog()
    totals: dict[str, int] = {}
    turn = itertools.count()
    used: list[int] = []

    def run() -> None:
        variant = variants[next(turn) % len(variants)]
        used.append(variant)
        for index in range(path.requests):
            for outcome, n in queries.call(partial(path.post, variant, index)).items():
                totals[outcome] = totals.get(outcome, 0) + n

    timing = timed(run, runs=runs, before=before)
    expected = "unchanged" if mode == "replay" else "written"
    wanted = row.items * timing.runs
    if totals.get(expected, 0) != wanted or sum(totals.values()) != wanted:
        row.problems.append(f"upsert {row.path} batch {row.batch} {mode}: expected {wanted} {expected}, got {totals}")
    return ModeResult(timing, queries, used[-1])


def measure_batch(path: _Path, fleet: Fleet, executions: Sequence[LatestExecution], batch: int, runs: int) -> UpsertRow:
    path.prepare(fleet, executions, batch)
    row = UpsertRow(path.name, batch, len(executions))
    row.modes["insert"] = _mode(row, path, "insert", (0,), runs, before=_truncate)
    row.modes["replace"] = _mode(row, path, "replace", (1, 0), runs)
    row.modes["replay"] = _mode(row, path, "replay", (row.modes["replace"].last_variant,), runs)
    return row


def upsert_measure(
    fleet: Fleet, *, scale: float, runs: int, http: AgentClient | None, progress: Callable[[str], None]
) -> list[UpsertRow]:
    finished = fleet.finished_single_node()
    items = max(1000, int(ITEMS_PER_SCALE * scale))
    paths: list[tuple[_Path, int, int]] = [(ServicePath(), items, SINGLE_ITEM_REQUESTS)]
    if http is not None:
        # HTTP costs about twice as much per item; half the items keep the default run short.
        paths.append((HttpPath(http), max(1000, items // 2), SINGLE_ITEM_REQUESTS // 4))
    rows = []
    for path, n, single in paths:
        for batch in BATCHES:
            progress(f"upsert {path.name}, batch {batch}")
            rows.append(measure_batch(path, fleet, finished[: single if batch == 1 else n], batch, runs))
    _truncate()
    return rows
