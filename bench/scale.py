"""Flat to a million targets: reconcile page times of scopes of 10k, 100k and 1M targets, swept
over HTTP against one `fleet serve` worker, and that worker's memory across the largest sweep.

Each size is its own satellite's scope at a site of its own, built server-side with
`INSERT … SELECT FROM generate_series` (a bulk load, like COPY, and not timed): racks of eight
devices, the benchmark policy (six single-node requirements and one rack requirement, so 6⅛
targets a device), an execution for 92 % of targets and a current evaluation for 95 % of the
finished ones. Sizes are built smallest first and all stay in the database, so the largest
scope is measured with every table at its largest: the 10k figure is the small-table baseline.
Every scope is then analysed (as `fleet apply` does after bulk writes) and swept twice: from an
empty projection (every target written or deferred) and again (the steady state: nothing written).
"""

from __future__ import annotations

import json
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import httpx
from django.db import connection, transaction

from bench.seed import RACK, RACK_SIZE, RESOURCE_CLASS, SINGLE_NODE, Fleet
from bench.server import FleetServer
from fleet.inventory.models import Satellite, Site
from fleet.policies.models import RequirementScope
from fleet.policies.selectors import load_resolutions
from fleet_rules.vocabulary import WorkflowName

URL = "/api/v1/burn-in/policy-progress/reconcile/"
LIMIT = 500
TARGETS_PER_DEVICE = len(SINGLE_NODE) + 1 / RACK_SIZE
DEFAULT_SIZES = (10_000, 100_000, 1_000_000)


@dataclass
class ScaleSweep:
    page_seconds: list[float] = field(default_factory=list)
    seconds: float = 0.0
    target_count: int = 0
    written: int = 0
    unchanged: int = 0
    deferred: int = 0
    partial: bool = False  # only the first pages were swept

    @property
    def median_page_ms(self) -> float:
        return statistics.median(self.page_seconds) * 1000

    @property
    def p99_page_ms(self) -> float:
        ordered = sorted(self.page_seconds)
        return ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))] * 1000

    @property
    def first_page_ms(self) -> float:
        return self.page_seconds[0] * 1000

    @property
    def last_page_ms(self) -> float:
        return self.page_seconds[-1] * 1000


@dataclass
class ScaleRow:
    targets: int
    devices: int
    build_seconds: float
    first: ScaleSweep
    second: ScaleSweep
    rss_start_mb: float = 0.0
    rss_peak_mb: float = 0.0
    problems: list[str] = field(default_factory=list)

    @property
    def rss_growth_mb(self) -> float:
        return self.rss_peak_mb - self.rss_start_mb


def scope_build(
    fleet: Fleet, targets: int, *, site: Site | None = None, name: str | None = None, devices: int | None = None
) -> tuple[Satellite, int]:
    """One satellite's scope of about `targets` targets (or of exactly `devices` devices), in bulk:
    at a site of its own, or as satellite `name` of `site`."""
    devices = devices or max(RACK_SIZE, round(targets / TARGETS_PER_DEVICE))
    racks = (devices + RACK_SIZE - 1) // RACK_SIZE
    if site is None:
        site = Site.objects.create(slug=f"scale-{targets}", name=f"Scale {targets:,} targets")
    name = name or f"scale-sat-{targets}"
    satellite = Satellite.objects.create(
        site=site, name=name, advertised_workflows=[{"name": w, "version": "1"} for w in WorkflowName.values]
    )
    specs = fleet.specs
    resolutions = load_resolutions((s.requirement.id, site.id) for s in specs)
    requirement_rows = [
        (
            s.requirement.id,
            s.requirement.test,
            s.metric,
            s.comparator,
            float(s.threshold),
            s.passing_value,
            s.failing_value,
            resolutions[(s.requirement.id, site.id)].key,
            s.requirement.scope == RequirementScope.SINGLE_NODE,
        )
        for s in specs
    ]
    assert len(requirement_rows) == len(SINGLE_NODE) + 1 and requirement_rows[-1][2] == RACK[2]
    params: dict[str, Any] = {
        "site": site.id,
        "satellite": satellite.id,
        "rc": RESOURCE_CLASS,
        "devices": devices,
        "racks": racks,
        "rack_size": RACK_SIZE,
        "prefix": f"{name}-",
    }
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("SELECT setseed(0.42)")
        cursor.execute(
            "CREATE TEMP TABLE scale_rack ON COMMIT DROP AS "
            "SELECT g AS n, gen_random_uuid() AS id FROM generate_series(0, %(racks)s - 1) g",
            params,
        )
        cursor.execute(
            "CREATE TEMP TABLE scale_device ON COMMIT DROP AS "
            "SELECT g AS n, gen_random_uuid() AS id FROM generate_series(0, %(devices)s - 1) g",
            params,
        )
        cursor.execute(
            "CREATE TEMP TABLE scale_requirement (id uuid, test text, metric text, comparator text, "
            "threshold float8, good float8, bad float8, key text, single boolean) ON COMMIT DROP"
        )
        cursor.executemany(
            "INSERT INTO scale_requirement VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s)", requirement_rows
        )
        cursor.execute(
            """
INSERT INTO inventory_topology (created_at, updated_at, id, unit, label, satellite_id, site_id)
SELECT now(), now(), r.id, 'rack', %(prefix)s || 'rack-' || r.n, %(satellite)s, %(site)s FROM scale_rack r;
INSERT INTO inventory_device (created_at, updated_at, id, hostname, serial, resource_class, state, enrolled_at,
                              satellite_id, site_id)
SELECT now(), now(), d.id, %(prefix)s || 'node-' || d.n, 'SN' || %(prefix)s || d.n, %(rc)s, 'burn_in', now(),
       %(satellite)s, %(site)s
FROM scale_device d;
INSERT INTO inventory_topologymembership (unit, device_id, topology_id)
SELECT 'rack', d.id, r.id FROM scale_device d JOIN scale_rack r ON r.n = d.n / %(rack_size)s;
CREATE TEMP TABLE scale_execution ON COMMIT DROP AS
SELECT gen_random_uuid() AS id, q.id AS requirement_id, q.test, q.metric, q.comparator, q.threshold, q.good,
       q.bad, q.key, t.device_id, t.topology_id, t.n, random() AS roll, random() AS pass_roll,
       random() AS evaluated_roll
FROM scale_requirement q
JOIN LATERAL (
    SELECT d.id AS device_id, NULL::uuid AS topology_id, d.n FROM scale_device d WHERE q.single
    UNION ALL
    SELECT NULL::uuid, r.id, r.n FROM scale_rack r WHERE NOT q.single
) t ON true
WHERE random() < 0.92;
INSERT INTO burnin_testexecution (id, test, status, parameters, metrics, error, started_at, finished_at,
                                  reported_by, created_at, updated_at, device_id, job_id, requirement_id,
                                  site_id, topology_id)
SELECT e.id, e.test,
       CASE WHEN e.roll < 0.02 THEN 'running' WHEN e.roll < 0.05 THEN 'errored' ELSE 'completed' END,
       '{"duration_s": 3600}'::jsonb,
       CASE WHEN e.roll < 0.05 THEN '{}'::jsonb
            ELSE jsonb_build_object(e.metric, jsonb_build_object(
                'value', CASE WHEN e.pass_roll >= 0.10 THEN e.good ELSE e.bad END, 'unit', 'n')) END,
       CASE WHEN e.roll >= 0.02 AND e.roll < 0.05 THEN 'runner crashed' ELSE '' END,
       now() - interval '3 days', CASE WHEN e.roll < 0.02 THEN NULL ELSE now() - interval '2 days' END,
       'bench', now() - interval '3 days', now() - interval '2 days', e.device_id, NULL, e.requirement_id,
       %(site)s, e.topology_id
FROM scale_execution e;
INSERT INTO burnin_evaluationresult (execution_id, passed, reason, metric_evaluations, evaluation_source_key,
                                     execution_updated_at, materialised_at)
SELECT e.id, e.roll >= 0.05 AND e.pass_roll >= 0.10,
       CASE WHEN e.roll < 0.05 THEN 'runner crashed' WHEN e.pass_roll < 0.10 THEN e.metric || ' fails' END,
       CASE WHEN e.roll < 0.05 THEN '{}'::jsonb ELSE jsonb_build_object(e.metric, jsonb_build_object(
           'passed', e.pass_roll >= 0.10, 'statistic_evaluations', NULL,
           'value_evaluation', jsonb_build_object('passed', e.pass_roll >= 0.10, 'threshold', e.threshold,
                                                  'comparator', e.comparator))) END,
       e.key, now() - interval '2 days', now() - interval '1 day'
FROM scale_execution e WHERE e.roll >= 0.02 AND e.evaluated_roll < 0.95;
""",
            params,
        )
    return satellite, devices


def _sweep(
    client: httpx.Client, satellite: Satellite, sample: Callable[[], None] | None = None, *, pages: int | None = None
) -> ScaleSweep:
    """A sweep over HTTP; with `pages`, only its first pages (the agent then drops the cursor)."""
    sweep = ScaleSweep()
    body: dict[str, Any] = {
        "site_slug": satellite.site.slug,
        "satellite_name": satellite.name,
        "resource_class": RESOURCE_CLASS,
        "limit": LIMIT,
    }
    started = time.perf_counter()
    while True:
        began = time.perf_counter()
        response = client.post(URL, json=body)
        sweep.page_seconds.append(time.perf_counter() - began)
        if response.status_code != 200:
            raise RuntimeError(f"reconcile page answered {response.status_code}: {response.text[:500]}")
        page = response.json()
        sweep.target_count = page["target_count"]
        sweep.written += page["written"]
        sweep.unchanged += page["unchanged"]
        sweep.deferred += page["deferred"]
        if sample is not None:
            sample()
        if page["next_cursor"] is None:
            break
        if pages is not None and len(sweep.page_seconds) >= pages:
            sweep.partial = True
            break
        body["cursor"] = page["next_cursor"]
    sweep.seconds = time.perf_counter() - started
    return sweep


#: The projection a complete first sweep would leave, for the targets a partial one did not reach:
#: the rules of `fleet_rules.verdicts.derive_verdict` over the build's one execution per target
#: (no row where the verdict is deferred), with the outcome of that one attempt. The steady sweep
#: that follows checks it: any row it has to write is reported as a problem.
_FILL = """
INSERT INTO burnin_policyprogress (site_id, satellite_id, resource_class, requirement_id, gate, device_id,
                                   topology_id, target_id, verdict, execution_id, finished_at,
                                   evaluation_source_key, policy_version, outcomes, watermark, reconciled_at,
                                   created_at)
SELECT %(site)s, %(satellite)s, %(rc)s, q.id, q.gate, t.device_id, t.topology_id, t.target_id,
       CASE WHEN e.id IS NULL THEN 'not_run' WHEN e.status = 'running' THEN 'in_progress'
            WHEN e.status = 'errored' THEN 'errored' WHEN r.passed THEN 'passed' ELSE 'failed' END,
       e.id, e.finished_at, CASE WHEN e.status <> 'running' THEN r.evaluation_source_key END, %(version)s,
       CASE WHEN e.id IS NULL OR e.status = 'running' THEN 0 WHEN e.status = 'errored' THEN 4
            WHEN r.passed THEN 1 ELSE 2 END,
       CASE WHEN e.status = 'running' THEN e.updated_at WHEN e.id IS NOT NULL THEN r.materialised_at END, now(), now()
FROM policies_requirement q
JOIN LATERAL (
    SELECT d.id AS device_id, NULL::uuid AS topology_id, d.id AS target_id FROM inventory_device d
    WHERE q.scope = 'single_node' AND d.satellite_id = %(satellite)s
    UNION ALL
    SELECT NULL::uuid, t.id, t.id FROM inventory_topology t
    WHERE q.scope = 'multi_node' AND t.satellite_id = %(satellite)s
) t ON true
LEFT JOIN burnin_testexecution e ON e.requirement_id = q.id AND COALESCE(e.device_id, e.topology_id) = t.target_id
     AND e.site_id = %(site)s
LEFT JOIN burnin_evaluationresult r ON r.execution_id = e.id
WHERE q.policy_id = %(policy)s AND q.retired_at IS NULL
  AND NOT (e.id IS NOT NULL AND e.status <> 'running'
           AND (r.execution_id IS NULL OR r.evaluation_source_key <> %(keys)s::jsonb ->> q.id::text
                OR r.execution_updated_at <> e.updated_at))
ON CONFLICT (requirement_id, target_id) DO NOTHING
"""


def projection_fill(fleet: Fleet, satellite: Satellite) -> None:
    """The projection a complete reconcile sweep of the satellite's scope would leave, in one statement."""
    resolutions = load_resolutions((s.requirement.id, satellite.site_id) for s in fleet.specs)
    keys = {str(s.requirement.id): resolutions[(s.requirement.id, satellite.site_id)].key for s in fleet.specs}
    with connection.cursor() as cursor:
        cursor.execute(
            _FILL,
            {
                "site": satellite.site_id,
                "satellite": satellite.id,
                "rc": RESOURCE_CLASS,
                "version": fleet.policy.version,
                "policy": fleet.policy.id,
                "keys": json.dumps(keys),
            },
        )
        cursor.execute("ANALYZE burnin_policyprogress")


def scale_measure(
    fleet: Fleet, *, sizes: tuple[int, ...], first_pages: int, progress: Callable[[str], None]
) -> list[ScaleRow]:
    """`first_pages` bounds the first (writing) sweep of each size: a million-target first sweep
    writes a million rows, which on a shared 2-core machine takes longer than the rest of the
    benchmark; its median page is taken from its first pages and the projection completed in bulk."""
    rows: list[ScaleRow] = []
    with FleetServer(workers=1) as server:
        for targets in sorted(sizes):
            progress(f"scale: building a scope of {targets:,} targets")
            began = time.perf_counter()
            satellite, devices = scope_build(fleet, targets)
            with connection.cursor() as cursor:
                cursor.execute("ANALYZE")
            built = time.perf_counter() - began
            token = server.token(satellite, ["burn-in-policy-progress:write"])
            with httpx.Client(
                base_url=server.base, headers={"Authorization": f"Bearer {token}"}, timeout=120
            ) as client:
                # Warm the worker (imports, pools, caches) on a throwaway page before measuring memory.
                client.post(
                    URL,
                    json={
                        "site_slug": satellite.site.slug,
                        "satellite_name": satellite.name,
                        "resource_class": RESOURCE_CLASS,
                        "limit": 1,
                    },
                )
                start_rss = server.rss_mb()
                peak = [start_rss]

                def sample(peak: list[float] = peak) -> None:
                    peak[0] = max(peak[0], server.rss_mb())

                progress(f"scale: {targets:,} targets, sweep 1 over HTTP (at most {first_pages} pages)")
                first = _sweep(client, satellite, sample, pages=first_pages)
                if first.partial:
                    progress(f"scale: {targets:,} targets, the rest of the projection in bulk")
                    projection_fill(fleet, satellite)
                progress(f"scale: {targets:,} targets, sweep 2 over HTTP")
                second = _sweep(client, satellite, sample)
            row = ScaleRow(targets, devices, built, first, second, rss_start_mb=start_rss, rss_peak_mb=peak[0])
            expected = len(SINGLE_NODE) * devices + (devices + RACK_SIZE - 1) // RACK_SIZE
            for label, sweep in (("first", first), ("second", second)):
                if sweep.partial:
                    continue
                if sweep.target_count != expected:
                    row.problems.append(
                        f"scale {targets}: {label} sweep target_count {sweep.target_count} ≠ {expected}"
                    )
                if sweep.written + sweep.unchanged + sweep.deferred != sweep.target_count:
                    row.problems.append(f"scale {targets}: {label} sweep counters do not add up")
            if second.written:
                row.problems.append(f"scale {targets}: the second sweep wrote {second.written} rows")
            rows.append(row)
    return rows
