"""The pending-evaluation feed's first page against the size of the site's history: a site with
10,000 historical executions and one with 1,000,000, each with 500 pending (finished, no
evaluation), everything else evaluated for the current key.

Built server-side in bulk (not timed), through the work list's triggers as any writer is. The
first read of a site finds every requirement's key new and lists what is pending there once
(timed and printed as its own figure: it is what the first read after a threshold change costs);
the first page is then timed over repeated reads.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from django.db import connection, transaction

from bench.seed import SINGLE_NODE, Fleet
from fleet.burnin.pending_evaluation_feed import pending_evaluations_page
from fleet.inventory.models import Satellite, Site
from fleet.policies.selectors import load_resolutions
from fleet_rules.vocabulary import WorkflowName

PENDING = 500
DEVICES = 1_000
PAGE = 500
DEFAULT_SIZES = (10_000, 1_000_000)


@dataclass
class PendingRow:
    history: int
    pending: int
    build_seconds: float
    first_read_seconds: float
    page_seconds: list[float] = field(default_factory=list)
    items: int = 0
    problems: list[str] = field(default_factory=list)

    @property
    def median_page_ms(self) -> float:
        return statistics.median(self.page_seconds) * 1000


_BUILD = """
INSERT INTO inventory_device (created_at, updated_at, id, hostname, serial, resource_class, state, enrolled_at,
                              satellite_id, site_id)
SELECT now(), now(), gen_random_uuid(), %(prefix)s || g, 'SN' || %(prefix)s || g, %(rc)s, 'burn_in', now(),
       %(satellite)s, %(site)s
FROM generate_series(1, %(devices)s) g;
CREATE TEMP TABLE pending_device ON COMMIT DROP AS
SELECT row_number() OVER (ORDER BY id) - 1 AS n, id FROM inventory_device WHERE site_id = %(site)s;
CREATE TEMP TABLE pending_execution ON COMMIT DROP AS
SELECT g AS n, gen_random_uuid() AS id, (%(requirements)s::uuid[])[1 + g %% %(requirement_count)s] AS requirement_id,
       (%(keys)s::varchar[])[1 + g %% %(requirement_count)s] AS key,
       (%(tests)s::varchar[])[1 + g %% %(requirement_count)s] AS test,
       d.id AS device_id, now() - interval '30 days' + g * interval '1 millisecond' AS at
FROM generate_series(0, %(history)s - 1) g JOIN pending_device d ON d.n = g %% %(devices)s;
INSERT INTO burnin_testexecution (id, test, status, parameters, metrics, error, started_at, finished_at,
                                  reported_by, created_at, updated_at, device_id, job_id, requirement_id,
                                  site_id, topology_id)
SELECT e.id, e.test, 'completed', '{"duration_s": 3600}'::jsonb, '{"m": {"value": 1, "unit": "n"}}'::jsonb, '',
       e.at, e.at, 'bench', e.at, e.at, e.device_id, NULL, e.requirement_id, %(site)s, NULL
FROM pending_execution e;
INSERT INTO burnin_evaluationresult (execution_id, passed, reason, metric_evaluations, evaluation_source_key,
                                     execution_updated_at, materialised_at)
SELECT e.id, true, NULL, '{}'::jsonb, e.key, e.at, now()
FROM pending_execution e WHERE e.n %% (%(history)s / %(pending)s) <> 0;
"""


def _build(fleet: Fleet, history: int) -> Satellite:
    site = Site.objects.create(slug=f"pending-{history}", name=f"Pending feed, {history:,} executions")
    satellite = Satellite.objects.create(
        site=site,
        name=f"pending-sat-{history}",
        advertised_workflows=[{"name": w, "version": "1"} for w in WorkflowName.values],
    )
    specs = fleet.specs[: len(SINGLE_NODE)]
    resolutions = load_resolutions((s.requirement.id, site.id) for s in specs)
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(
            _BUILD,
            {
                "site": site.id,
                "satellite": satellite.id,
                "rc": fleet.specs[0].requirement.policy.resource_class,
                "prefix": f"p{history}-",
                "devices": DEVICES,
                "history": history,
                "pending": PENDING,
                "requirements": [s.requirement.id for s in specs],
                "keys": [resolutions[(s.requirement.id, site.id)].key for s in specs],
                "tests": [s.requirement.test for s in specs],
                "requirement_count": len(specs),
            },
        )
    with connection.cursor() as cursor:
        # The bulk load listed a million executions and its evaluations unlisted all but 500 in
        # one statement: a million dead work-list rows at once, which autovacuum would clear
        # within a minute (and a live system never makes in one go). Unvacuumed, the first page
        # read past them: 1.2 s instead of 80 ms on the loaded machine (docs/scaling.md).
        cursor.execute("VACUUM (ANALYZE) burnin_pendingevaluation")
        cursor.execute("ANALYZE")
    return satellite


def pending_measure(
    fleet: Fleet, *, sizes: tuple[int, ...], runs: int, progress: Callable[[str], None]
) -> list[PendingRow]:
    rows = []
    for history in sorted(sizes):
        progress(f"pending feed: building a site with {history:,} executions, {PENDING} pending")
        began = time.perf_counter()
        satellite = _build(fleet, history)
        built = time.perf_counter() - began
        began = time.perf_counter()
        pending_evaluations_page(satellite=satellite, limit=PAGE)
        row = PendingRow(history, PENDING, built, time.perf_counter() - began)
        for _ in range(max(5, runs)):
            began = time.perf_counter()
            page = pending_evaluations_page(satellite=satellite, limit=PAGE)
            row.page_seconds.append(time.perf_counter() - began)
        row.items = len(page.items)
        if row.items != PENDING:
            row.problems.append(f"pending feed at {history:,}: the first page held {row.items} items, not {PENDING}")
        rows.append(row)
    return rows
