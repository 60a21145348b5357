"""Benchmark the three seed operations and compare them with raw PostgreSQL on this machine.

    python bench/run.py [--scale 2 | --scale small] [--runs 3] [--no-http] [--results PATH]

Prints figures and ratios; asserts nothing about speed (timings belong to a machine, not to the
code). It runs in a throwaway database `test_fleet_bench_<pid>` on the server the service would
use (DATABASE_URL, else the embedded one), created and migrated here and dropped at the end, so
the developer's own `fleet` database is never touched. See bench/README.md.
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


#: `--scale small` (`make bench SCALE=small`): a fifth of the fleet, for a quick check.
SMALL = 0.2


def _scale(value: str) -> float:
    return SMALL if value == "small" else float(value)


def _arguments(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--scale",
        type=_scale,
        default=1.0,
        help="grow every size by this factor (default 1); `small` = 0.2 and one run per figure (under 2 min)",
    )
    parser.add_argument("--runs", type=int, default=3, help="runs per figure, median reported (default 3)")
    parser.add_argument("--no-http", action="store_true", help="measure the service functions only")
    parser.add_argument(
        "--results", type=Path, default=REPO / "bench" / "results.json", help="where to write the figures as JSON"
    )
    args = parser.parse_args(argv)
    if args.scale == SMALL:
        args.runs = 1
    return args


def _configure() -> None:
    """Settings read at import time: these must be in the environment before Django starts."""
    sys.path.insert(0, str(REPO))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "fleet.settings")
    # Django prefixes nothing when TEST NAME is set: this is the database we create and drop.
    os.environ["FLEET_TEST_DB_NAME"] = f"test_fleet_bench_{os.getpid()}"
    os.environ.setdefault("FLEET_LOG_LEVEL", "WARNING")
    # A batch-1 HTTP run sends hundreds of requests a second from one client; the production
    # rate limit would turn the measurement into a measurement of 429s.
    os.environ.setdefault("FLEET_THROTTLE_CLIENT", "10000000/min")


def _machine(load: list[float]):
    from django.conf import settings
    from django.db import connection

    from bench.report import Machine

    with connection.cursor() as cursor:
        values = {}
        for name in ("server_version", "fsync", "synchronous_commit", "shared_buffers"):
            cursor.execute(f"SHOW {name}")
            values[name] = cursor.fetchone()[0]
    params = connection.get_connection_params()
    where = f"{params.get('host') or 'localhost'}:{params.get('port') or 5432}"
    server = (
        f"DATABASE_URL server {where}"
        if os.environ.get("DATABASE_URL", "").strip()
        else f"embedded, {settings.EMBEDDED_POSTGRES_DIR}"
    )
    import django

    return Machine(
        cpus=os.cpu_count() or 0,
        postgres=values["server_version"],
        server=f"{server}, database {connection.settings_dict['NAME']}",
        settings=", ".join(f"{k} {values[k]}" for k in ("fsync", "synchronous_commit", "shared_buffers")),
        load=f"load average {load[0]:.1f} at start, {load[-1]:.1f} at end",
        software=f"Python {platform.python_version()}, Django {django.get_version()}, {platform.platform(terse=True)}",
    )


def _benchmark(args: argparse.Namespace) -> int:
    from rich.console import Console

    from bench.anchor import anchor_measure
    from bench.clients import AgentClient
    from bench.reconcile import reconcile_measure
    from bench.report import (
        anchor_table,
        machine_print,
        ratio_table,
        reconcile_table,
        rerun_table,
        table_print,
        upsert_table,
    )
    from bench.rerun import rerun_measure
    from bench.results import results_build, results_write
    from bench.seed import evaluations_materialise, fleet_build
    from bench.upsert import upsert_measure

    # Piped output (a log, a CI artefact) gets a width that fits the tables instead of rich's 80.
    out = Console(width=None if sys.stdout.isatty() else 130)
    log = Console(stderr=True)
    started = time.perf_counter()
    load = [os.getloadavg()[0]]

    def progress(message: str) -> None:
        log.print(f"[dim]{time.perf_counter() - started:6.1f}s  {message}[/dim]")

    progress("building the fleet")
    fleet = fleet_build(scale=args.scale)
    progress(f"fleet: {len(fleet.device_ids):,} devices, {fleet.target_count:,} targets")
    http = None
    if not args.no_http:
        http = AgentClient(fleet.satellite, ["test-execution:evaluate", "burn-in-policy-progress:write"])

    upserts = upsert_measure(fleet, scale=args.scale, runs=args.runs, http=http, progress=progress)
    progress("materialising evaluations for reconcile")
    evaluations_materialise(fleet)
    reconciles = reconcile_measure(fleet, runs=args.runs, http=http, progress=progress)
    reruns = rerun_measure(fleet, scale=args.scale, runs=args.runs, progress=progress)
    progress("anchor: raw PostgreSQL upsert")
    anchors = anchor_measure(scale=args.scale, runs=args.runs)
    elapsed = time.perf_counter() - started
    load.append(os.getloadavg()[0])

    out.print()
    machine_print(out, _machine(load), scale=args.scale, runs=args.runs)
    for table in (
        upsert_table(upserts, args.runs),
        reconcile_table(reconciles, args.runs),
        rerun_table(reruns, args.runs),
        anchor_table(anchors, args.runs),
        ratio_table(upserts, reconciles, anchors),
    ):
        table_print(out, table)
    results = results_build(
        scale=args.scale, load=load, upserts=upserts, reconciles=reconciles, reruns=reruns, anchors=anchors
    )
    results_write(results, args.results)
    out.print(f"figures written to {args.results}")
    problems = [p for row in (*upserts, *reconciles, *reruns) for p in row.problems]
    for problem in problems:
        out.print(f"[bold red]check failed:[/bold red] {problem}")
    out.print(f"measured in {elapsed:.0f} s (fleet setup included; database setup and teardown not)")
    return 1 if problems else 0


def main(argv: list[str] | None = None) -> int:
    args = _arguments(argv)
    _configure()
    import django

    django.setup()
    from django.db import connection

    original_name = connection.settings_dict["NAME"]
    try:
        connection.creation.create_test_db(verbosity=0, autoclobber=True, serialize=False)
        return _benchmark(args)
    finally:
        # create_test_db renames the connection's database only once it exists: drop it then,
        # even when migrating or the benchmark failed halfway.
        if connection.settings_dict["NAME"] != original_name:
            connection.creation.destroy_test_db(original_name, verbosity=0)


if __name__ == "__main__":
    sys.exit(main())
