"""Reconcile at history depth (part `history`): the bench fleet's first and steady sweeps when every
target carries `depth` attempts instead of one.

A real fleet's targets carry several attempts, reruns and repairs, and a reconcile page that
writes a row reads that target's history (its attempts' outcomes, its failures toward repair). The
other parts give each target one execution, which flatters that cost. Here the fleet is swept at
depth 1 (as built), then deepened in place to each larger depth and swept again, all with the same
statistics treatment (ANALYZE before each depth), so the ratio of the two is the history's cost.

Deepening (bulk, server-side, not timed): for each target that has an execution, `depth − 1`
earlier attempts, one day apart before its latest, cycling failed, errored, passed (g = 1, 2, 3, …
days back), each with its current evaluation; and, once the depth passes `REPAIRED_AFTER`, one
repair per device between its third and fourth earlier attempt (a repair restarts the count:
only the attempts after it count as outcomes and failures). At most two counted failures follow
the repair, below the policy's `repair_after_failures` (3), so no device moves: the sweep pays for
counting, not for moves a repeated first sweep would make differently each time.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from django.db import connection, transaction

from bench.reconcile import ReconcileRow, _measure, _service_pages
from bench.seed import Fleet
from fleet.core.rows import recordset

DEFAULT_DEPTHS = (1, 8)
#: Sweep pairs per depth whatever `--runs` says: the figure is a ratio of two depths measured
#: minutes apart, and one first sweep of a second moves ±20 % on a shared machine.
AT_LEAST = 3
#: The repair goes between the third and fourth earlier attempt: it exists once a depth has them.
REPAIRED_AFTER = 3


@dataclass
class HistoryRow:
    depth: int
    executions: int  # the site's executions when measured
    repairs: int
    build_seconds: float
    row: ReconcileRow
    problems: list[str] = field(default_factory=list)


#: The `depth − 1` earlier attempts of every target with an execution that it lacks (`have` of them
#: are already there), read from each target's latest execution; their evaluations; then one
#: repair per device half a day before its (REPAIRED_AFTER + 1)-th earlier attempt's day.
_DEEPEN = """
CREATE TEMP TABLE bench_history ON COMMIT DROP AS
WITH spec AS (
    SELECT * FROM jsonb_to_recordset(%(specs)s::jsonb)
        AS s(requirement_id uuid, metric text, good float8, bad float8, key text)
), latest AS (
    SELECT DISTINCT ON (e.requirement_id, coalesce(e.device_id, e.topology_id))
           e.requirement_id, e.device_id, e.topology_id, e.test, e.created_at
    FROM burnin_testexecution e WHERE e.site_id = %(site)s AND NOT e.diagnostic
    ORDER BY e.requirement_id, coalesce(e.device_id, e.topology_id), e.created_at DESC, e.id DESC
)
SELECT gen_random_uuid() AS id, l.requirement_id, l.device_id, l.topology_id, l.test,
       CASE g %% 3 WHEN 1 THEN 'failed' WHEN 2 THEN 'errored' ELSE 'passed' END AS outcome,
       l.created_at - g * interval '1 day' AS created_at, s.metric, s.good, s.bad, s.key
FROM latest l JOIN spec s ON s.requirement_id = l.requirement_id
CROSS JOIN generate_series(%(have)s, %(depth)s - 1) g;

INSERT INTO burnin_testexecution (id, test, status, parameters, metrics, error, started_at, finished_at,
                                  reported_by, created_at, updated_at, device_id, job_id, requirement_id,
                                  site_id, topology_id)
SELECT h.id, h.test, CASE WHEN h.outcome = 'errored' THEN 'errored' ELSE 'completed' END,
       '{"duration_s": 3600}'::jsonb,
       CASE WHEN h.outcome = 'errored' THEN '{}'::jsonb
            ELSE jsonb_build_object(h.metric, jsonb_build_object(
                'value', CASE WHEN h.outcome = 'passed' THEN h.good ELSE h.bad END, 'unit', 'n')) END,
       CASE WHEN h.outcome = 'errored' THEN 'runner crashed' ELSE '' END,
       h.created_at, h.created_at + interval '61 minutes', 'bench-history', h.created_at,
       h.created_at + interval '61 minutes', h.device_id, NULL, h.requirement_id, %(site)s, h.topology_id
FROM bench_history h;

INSERT INTO burnin_evaluationresult (execution_id, passed, reason, metric_evaluations, evaluation_source_key,
                                     execution_updated_at, materialised_at)
SELECT h.id, h.outcome = 'passed',
       CASE h.outcome WHEN 'errored' THEN 'runner crashed' WHEN 'failed' THEN h.metric || ' fails' END,
       CASE WHEN h.outcome = 'errored' THEN '{}'::jsonb ELSE jsonb_build_object(h.metric, jsonb_build_object(
           'passed', h.outcome = 'passed', 'statistic_evaluations', NULL)) END,
       h.key, h.created_at + interval '61 minutes', now()
FROM bench_history h;
"""

#: One repair per device of the site without one, half a day before its earliest latest execution
#: less REPAIRED_AFTER days: after the (REPAIRED_AFTER + 1)-th earlier attempt of each of its
#: targets, before the REPAIRED_AFTER-th (the latest executions of a device lie within hours).
_REPAIR = """
INSERT INTO lifecycle_repair (id, device_id, summary, parts, actor, created_at, rerun_mode, job_ids)
SELECT gen_random_uuid(), e.device_id, 'bench: reseated', '[]'::jsonb, 'bench',
       min(e.created_at) - (%(after)s + 0.5) * interval '1 day', 'all', '[]'::jsonb
FROM burnin_testexecution e
WHERE e.site_id = %(site)s AND e.device_id IS NOT NULL AND e.reported_by = 'bench'
  AND NOT EXISTS (SELECT 1 FROM lifecycle_repair r WHERE r.device_id = e.device_id)
GROUP BY e.device_id
"""


def history_deepen(fleet: Fleet, *, have: int, depth: int) -> None:
    """Give every target with an execution `depth` attempts, where it has `have` (see the module)."""
    specs = recordset(
        {
            "requirement_id": str(s.requirement.id),
            "metric": s.metric,
            "good": s.passing_value,
            "bad": s.failing_value,
            "key": fleet.keys[s.requirement.id],
        }
        for s in fleet.specs
    )
    with transaction.atomic(), connection.cursor() as cursor:
        if depth > have:
            cursor.execute(_DEEPEN, {"specs": specs, "site": fleet.site.id, "have": have, "depth": depth})
        if depth > REPAIRED_AFTER + 1:
            cursor.execute(_REPAIR, {"site": fleet.site.id, "after": REPAIRED_AFTER})


def _counts(fleet: Fleet) -> tuple[int, int]:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT (SELECT count(*) FROM burnin_testexecution WHERE site_id = %(site)s), "
            "(SELECT count(*) FROM lifecycle_repair r JOIN inventory_device d ON d.id = r.device_id "
            "WHERE d.site_id = %(site)s)",
            {"site": fleet.site.id},
        )
        executions, repairs = cursor.fetchone()
    return executions, repairs


def history_measure(
    fleet: Fleet, *, depths: tuple[int, ...], runs: int, progress: Callable[[str], None]
) -> list[HistoryRow]:
    """Service sweep pairs (limit 500, from an empty projection, then steady; the median of at
    least `AT_LEAST`) at each depth,
    smallest first, the fleet deepened in place between them. Leaves the fleet at the largest."""
    rows: list[HistoryRow] = []
    have = 1
    for depth in sorted(set(depths)):
        progress(f"history: {depth} attempts per target")
        began = time.perf_counter()
        history_deepen(fleet, have=have, depth=depth)
        have = max(have, depth)
        with connection.cursor() as cursor:
            cursor.execute("ANALYZE")
        built = time.perf_counter() - began
        executions, repairs = _counts(fleet)
        row = _measure(f"service, history {depth}", _service_pages, fleet, 500, runs, at_least=AT_LEAST)
        rows.append(HistoryRow(depth, executions, repairs, built, row, problems=list(row.problems)))
    if len(rows) > 1:
        base = rows[0].row.first.queries[1:-1]
        for other in rows[1:]:
            if other.row.first.queries[1:-1] and base and set(other.row.first.queries[1:-1]) != set(base):
                other.problems.append(
                    f"history {other.depth}: queries per page {sorted(set(other.row.first.queries[1:-1]))} "
                    f"≠ {sorted(set(base))} at depth {rows[0].depth}"
                )
    return rows
