"""Many agents at once: N clients against one `fleet serve`, real HTTP and real tokens, each
sweeping its own satellite's scope and posting evaluation-result upserts, for a fixed time.

Every client is an agent of its own satellite (its own OAuth2 client and token), all at one site:
it runs reconcile sweeps of its scope (limit 500) and, between pages, posts a batch of 100
re-evaluations of its executions (alternating payloads, so each batch writes). The same run with
one client gives the baseline. A 503 is the server shedding load (a request waited longer than
`FLEET_DB_POOL_TIMEOUT` for a database connection): counted and printed, not a failure of the
run. Latencies are per request, as the client sees them; clients run as asyncio tasks in this
process, which shares the machine's cores with the server and PostgreSQL.
"""

from __future__ import annotations

import asyncio
import json
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import httpx
from django.db import connection

from bench.scale import scope_build
from bench.seed import RESOURCE_CLASS, Fleet
from bench.server import FleetServer
from fleet.inventory.models import Satellite, Site

RECONCILE = "/api/v1/burn-in/policy-progress/reconcile/"
UPSERT = "/api/v1/burn-in/evaluations/results/"
TARGETS_PER_SCOPE = 1_500
BATCH = 100
DEFAULT_CLIENTS = 50


@dataclass
class ConcurrentRun:
    clients: int
    workers: int
    seconds: float
    page_latencies: list[float] = field(default_factory=list)
    upsert_latencies: list[float] = field(default_factory=list)
    targets: int = 0
    items: int = 0
    written: int = 0
    refused: int = 0
    errors: dict[int, int] = field(default_factory=dict)

    @staticmethod
    def _q(values: list[float], q: float) -> float:
        ordered = sorted(values)
        return ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000 if ordered else 0.0

    @property
    def page_p50_ms(self) -> float:
        return statistics.median(self.page_latencies) * 1000 if self.page_latencies else 0.0

    @property
    def page_p99_ms(self) -> float:
        return self._q(self.page_latencies, 0.99)

    @property
    def upsert_p50_ms(self) -> float:
        return statistics.median(self.upsert_latencies) * 1000 if self.upsert_latencies else 0.0

    @property
    def upsert_p99_ms(self) -> float:
        return self._q(self.upsert_latencies, 0.99)

    @property
    def requests_per_s(self) -> float:
        return (len(self.page_latencies) + len(self.upsert_latencies)) / self.seconds

    @property
    def targets_per_s(self) -> float:
        return self.targets / self.seconds

    @property
    def items_per_s(self) -> float:
        return self.items / self.seconds


@dataclass
class ConcurrentResult:
    runs: list[ConcurrentRun]
    problems: list[str] = field(default_factory=list)


_ITEMS = """
SELECT e.id, e.updated_at, r.passed, r.reason, r.metric_evaluations, r.evaluation_source_key
FROM burnin_testexecution e JOIN burnin_evaluationresult r ON r.execution_id = e.id
JOIN inventory_device d ON d.id = e.device_id
WHERE d.satellite_id = %s AND e.status <> 'running' AND r.execution_updated_at = e.updated_at
ORDER BY e.id LIMIT %s
"""


def _bodies(satellite: Satellite) -> list[str]:
    """Two upsert bodies for this satellite: its evaluations as stored, and re-evaluated."""
    with connection.cursor() as cursor:
        cursor.execute(_ITEMS, [satellite.id, BATCH])
        rows = cursor.fetchall()
    bodies = []
    for variant in (0, 1):
        items = []
        for execution_id, updated_at, passed, reason, evaluations, key in rows:
            evaluations = json.loads(evaluations) if isinstance(evaluations, str) else evaluations
            items.append(
                {
                    "execution_id": str(execution_id),
                    "expected_updated_at": updated_at.isoformat(),
                    "evaluation_source_key": key,
                    "evaluation_result": {
                        "passed": passed,
                        "reason": f"{reason or 'all thresholds met'} (re-evaluated)" if variant else reason,
                        "metric_evaluations": evaluations,
                    },
                }
            )
        bodies.append(json.dumps({"results": items}, separators=(",", ":")))
    return bodies


@dataclass
class _Agent:
    satellite: Satellite
    token: str
    bodies: list[str]


async def _agent(client: httpx.AsyncClient, agent: _Agent, run: ConcurrentRun, deadline: float) -> None:
    headers = {"Authorization": f"Bearer {agent.token}", "Content-Type": "application/json"}
    scope: dict[str, Any] = {
        "site_slug": agent.satellite.site.slug,
        "satellite_name": agent.satellite.name,
        "resource_class": RESOURCE_CLASS,
        "limit": 500,
    }
    cursor = None
    variant = 0
    while time.perf_counter() < deadline:
        body = scope if cursor is None else {**scope, "cursor": cursor}
        began = time.perf_counter()
        response = await client.post(RECONCILE, json=body, headers=headers)
        run.page_latencies.append(time.perf_counter() - began)
        if response.status_code != 200:
            run.errors[response.status_code] = run.errors.get(response.status_code, 0) + 1
            cursor = None
            continue
        page = response.json()
        run.targets += page["written"] + page["unchanged"] + page["deferred"]
        cursor = page["next_cursor"]
        began = time.perf_counter()
        response = await client.post(UPSERT, content=agent.bodies[variant], headers=headers)
        run.upsert_latencies.append(time.perf_counter() - began)
        variant = 1 - variant
        if response.status_code != 200:
            run.errors[response.status_code] = run.errors.get(response.status_code, 0) + 1
            continue
        counts = response.json()
        run.items += counts["written"] + counts["unchanged"]
        run.written += counts["written"]
        run.refused += counts["stale"] + counts["invalid"]


async def _run(server: FleetServer, agents: list[_Agent], seconds: float, workers: int) -> ConcurrentRun:
    run = ConcurrentRun(clients=len(agents), workers=workers, seconds=seconds)
    limits = httpx.Limits(max_connections=len(agents) + 5, max_keepalive_connections=len(agents) + 5)
    async with httpx.AsyncClient(base_url=server.base, timeout=120, limits=limits) as client:
        began = time.perf_counter()
        deadline = began + seconds
        await asyncio.gather(*(_agent(client, a, run, deadline) for a in agents))
        run.seconds = time.perf_counter() - began
    return run


def concurrent_measure(
    fleet: Fleet, *, clients: int, seconds: float, workers: int, progress: Callable[[str], None]
) -> ConcurrentResult:
    progress(f"concurrent: building {clients} satellites' scopes of {TARGETS_PER_SCOPE:,} targets")
    site = Site.objects.create(slug="concurrent", name="Concurrent agents")
    satellites = [scope_build(fleet, TARGETS_PER_SCOPE, site=site, name=f"agent-{i:02d}")[0] for i in range(clients)]
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")
    result = ConcurrentResult(runs=[])
    with FleetServer(workers=workers) as server:
        agents = [
            _Agent(s, server.token(s, ["burn-in-policy-progress:write", "test-execution:evaluate"]), _bodies(s))
            for s in satellites
        ]
        # Warm every worker and fill the projections (the first sweep writes; the runs then
        # measure the agents' steady state plus the upserts' writes).
        progress("concurrent: warm-up")
        asyncio.run(_run(server, agents, 5.0, workers))
        for count in (1, clients):
            progress(f"concurrent: {count} client(s) for {seconds:g} s")
            result.runs.append(asyncio.run(_run(server, agents[:count], seconds, workers)))
    for run in result.runs:
        if run.refused:
            result.problems.append(f"concurrent, {run.clients} clients: {run.refused} upsert items stale or invalid")
        if set(run.errors) - {503}:
            result.problems.append(f"concurrent, {run.clients} clients: error statuses {run.errors}")
    return result
