"""Clocks and query counters.

Every timed request is also counted: Django's psycopg 3 backend binds parameters client-side, so
the debug cursor only decodes a query text psycopg already built (about 2 % on a reconcile
sweep, measured), and counting every request is stronger evidence of a constant count than
counting a sample. Counts are what `CaptureQueriesContext` (and so the test suite) sees,
BEGIN/COMMIT/SAVEPOINT included.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TypeVar

from django.db import connection
from django.test.utils import CaptureQueriesContext

T = TypeVar("T")

#: A figure whose first run takes longer than this is not repeated: repeating the long runs
#: would triple the run time for a median that moves less than the machine's own noise.
CHEAP_SECONDS = 1.0


@dataclass(frozen=True)
class Timing:
    seconds: float  # median of the runs
    runs: int

    def rate(self, n: int) -> float:
        return rate(n, self.seconds)


@dataclass
class QueryLog:
    """Queries sent by each counted call."""

    counts: list[int] = field(default_factory=list)

    def call(self, fn: Callable[[], T]) -> T:
        # The log is a deque of at most 9,000 entries: once full, its length stops growing and
        # CaptureQueriesContext (which subtracts lengths) would count 0. Start each call empty.
        connection.queries_log.clear()
        with CaptureQueriesContext(connection) as captured:
            result = fn()
        self.counts.append(len(captured.captured_queries))
        return result

    def spread(self) -> str:
        return spread(self.counts)


def timed(
    fn: Callable[[], object], *, runs: int, before: Callable[[], object] | None = None, every_run: bool = False
) -> Timing:
    """Median wall time of up to `runs` calls (one only when it is not cheap, unless `every_run`);
    `before` (untimed) resets the state each run needs."""
    samples: list[float] = []
    while len(samples) < runs:
        if before is not None:
            before()
        start = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - start)
        if samples[0] > CHEAP_SECONDS and not every_run:
            break
    return Timing(statistics.median(samples), len(samples))


def spread(counts: list[int]) -> str:
    """`3` when every call sent the same number of queries, `3–5` otherwise."""
    if not counts:
        return "–"
    low, high = min(counts), max(counts)
    return str(low) if low == high else f"{low}–{high}"


def rate(n: int, elapsed: float) -> float:
    return n / elapsed if elapsed > 0 else float("inf")
