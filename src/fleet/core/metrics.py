"""Prometheus metrics: the kernel's own families, the scrape-time gauges the apps register, and
the exposition `/metrics` serves (docs/operations.md, "Monitoring").

Counters and histograms live in prometheus-client's metric objects. Under `fleet serve` every
worker process writes its values to files in `PROMETHEUS_MULTIPROC_DIR` (set by the `fleet`
command before anything imports prometheus-client, a fresh directory per start), and a scrape,
whichever worker answers it, adds up the files of every worker that ever ran in this start: a
worker that died keeps its counts, so no counter ever goes backwards. No gauge is kept per
process: the gauges (`fleet_jobs`, `fleet_targets`, …) are read from the database at scrape
time by the collectors the apps register (`register_scrape_collector`), in a fixed number of
queries, and kept for `FLEET_METRICS_CACHE_SECONDS` so scrapes cannot load the database. So a
dead worker leaves nothing stale behind and no per-pid clean-up is needed.

Metric names and labels are part of the product (operators build dashboards and alerts on
them, `deploy/`): change them only as a breaking change.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Iterable

from django.conf import settings
from django.db import transaction
from prometheus_client import REGISTRY, CollectorRegistry, Counter, Histogram
from prometheus_client.exposition import choose_encoder
from prometheus_client.metrics_core import Metric
from prometheus_client.multiprocess import MultiProcessCollector

#: Seconds buckets of request durations: up to the database statement timeout (30 s).
DURATION_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)

HTTP_REQUESTS = Counter(
    "fleet_http_requests",
    "HTTP requests answered, by OpenAPI operationId (or route name), method and status.",
    ["operation", "method", "status"],
)
HTTP_DURATION = Histogram(
    "fleet_http_request_duration_seconds",
    "Time from the request reaching Django to its response, by OpenAPI operationId (or route name).",
    ["operation"],
    buckets=DURATION_BUCKETS,
)
DATABASE_UNAVAILABLE = Counter(
    "fleet_database_unavailable",
    "503 service_unavailable responses served because the database could not be reached or cancelled a statement.",
)

ScrapeCollector = Callable[[], Iterable[Metric]]
_scrape_collectors: dict[str, tuple[ScrapeCollector, tuple[str, ...]]] = {}


def register_scrape_collector(name: str, collect: ScrapeCollector, *, permissions: tuple[str, ...]) -> None:
    """Add gauges computed from the database at scrape time (an app's `AppConfig.ready` does
    this; the kernel knows no app). `collect` must run a fixed number of queries; `permissions`
    are what a person needs to see what its gauges reveal (an operator's scraping client acts
    with at most its owner's permissions)."""
    _scrape_collectors[name] = (collect, permissions)


def scrape_permissions() -> tuple[str, ...]:
    """Every permission the registered gauges need, sorted."""
    return tuple(sorted({p for _, permissions in _scrape_collectors.values() for p in permissions}))


def on_commit(record: Callable[[], None]) -> None:
    """Count what a service did once its transaction has committed: a rolled-back write counts
    nothing. A failing metric never fails the request (`robust`)."""
    transaction.on_commit(record, robust=True)


def http_request_observed(*, operation: str, method: str, status: int, seconds: float) -> None:
    HTTP_REQUESTS.labels(operation, method, str(status)).inc()
    HTTP_DURATION.labels(operation).observe(seconds)


def database_unavailable_counted() -> None:
    DATABASE_UNAVAILABLE.inc()


class _ScrapeGauges:
    """Every registered scrape collector, computed at most once per cache period per process
    (concurrent scrapes wait for the one computing)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._families: list[Metric] = []
        self._expires = 0.0

    def collect(self) -> Iterable[Metric]:
        with self._lock:
            now = time.monotonic()
            if now >= self._expires:
                families: list[Metric] = []
                for collect, _permissions in _scrape_collectors.values():
                    families.extend(collect())
                self._families = families
                self._expires = now + settings.METRICS_CACHE_SECONDS
            return list(self._families)

    def forget(self) -> None:
        """Drop the cached gauges (tests)."""
        with self._lock:
            self._expires = 0.0


scrape_gauges = _ScrapeGauges()


class _Collected:
    """A collector over a fixed list of families (what a registry can hold)."""

    def __init__(self, source: Callable[[], Iterable[Metric]]) -> None:
        self._source = source

    def collect(self) -> Iterable[Metric]:
        return self._source()

    def describe(self) -> list[Metric]:
        return []  # nothing to check at registration: never run a query to register


def multiprocess_dir() -> str | None:
    return os.environ.get("PROMETHEUS_MULTIPROC_DIR") or None


def exposition(accept: str) -> tuple[bytes, str]:
    """Every family, in the format the scraper's `Accept` header asks for (Prometheus text 0.0.4
    unless it asks for OpenMetrics or text 1.0.0), and its content type: every worker's counters
    and histograms added up (multiprocess mode) or this process's, then the scrape-time gauges."""
    registry = CollectorRegistry(auto_describe=False)
    if multiprocess_dir():
        MultiProcessCollector(registry)
    else:
        registry.register(_Collected(REGISTRY.collect))
    registry.register(_Collected(scrape_gauges.collect))
    encode, content_type = choose_encoder(accept)
    return encode(registry), content_type
