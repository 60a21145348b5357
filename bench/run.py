"""Benchmark the three seed operations and compare them with raw PostgreSQL on this machine.

    python bench/run.py [--scale 2 | --scale small] [--runs 3] [--no-http] [--results PATH]

Prints figures and ratios; asserts nothing about speed (timings belong to a machine, not to the
code). It runs in a throwaway database `test_fleet_bench_<pid>` on the server the service would
use (DATABASE_URL, else the embedded one), created and migrated here and dropped at the end, so
the developer's own `fleet` database is never touched. See bench/README.md.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import platform
import sys
import time
from collections.abc import Iterator
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


#: `--scale small` (`make bench SCALE=small`): a fifth of the fleet, for a quick check.
SMALL = 0.2

#: The selection of the preview and dispatch figures at fleet scale (`dispatch_10k_s`).
RERUN_AT_SCALE = 10_000

#: What `--parts` may name, in the order they run.
PARTS = (
    "upsert",
    "reconcile",
    "rerun",
    "anchor",
    "scale",
    "pending",
    "concurrent",
    "dashboard",
    "dashboard100k",
    "history",
    "bringup",
)


def _scale(value: str) -> float:
    return SMALL if value == "small" else float(value)


def _arguments(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--scale",
        type=_scale,
        default=1.0,
        help="grow every size by this factor (default 1); `small` = 0.2 and one run per figure (under 3 min)",
    )
    parser.add_argument("--runs", type=int, default=3, help="runs per figure, median reported (default 3)")
    parser.add_argument("--no-http", action="store_true", help="measure the service functions only")
    parser.add_argument(
        "--targets",
        type=int,
        default=None,
        help="largest reconcile scope of the fleet-scale run (default 1,000,000; 100,000 with --scale small); "
        "it also runs 10,000 and 100,000 below it",
    )
    parser.add_argument(
        "--first-pages",
        type=int,
        default=200,
        help="pages of each fleet-scale size's first (writing) sweep; the rest of its projection is filled in bulk "
        "(default 200: all of 10k and 100k, a tenth of 1M)",
    )
    parser.add_argument(
        "--history",
        type=int,
        default=None,
        help="executions at the pending feed's larger site (default 1,000,000; 100,000 with --scale small)",
    )
    parser.add_argument(
        "--history-depths",
        default="1,8",
        help="comma-separated attempts per target of the history part's sweeps (default 1,8; the fleet is "
        "deepened in place, smallest first)",
    )
    parser.add_argument(
        "--clients", type=int, default=None, help="agents of the concurrency run (default 50; 10 with --scale small)"
    )
    parser.add_argument(
        "--agent-seconds", type=float, default=None, help="length of each concurrency run (default 20; small 8)"
    )
    parser.add_argument("--workers", type=int, default=2, help="`fleet serve` workers of the concurrency run (2)")
    parser.add_argument(
        "--dashboard-devices",
        default=None,
        help="comma-separated site sizes (devices) of the dashboard100k part (default 1000,100000)",
    )
    parser.add_argument(
        "--bringup-processes",
        choices=("auto", "on", "off"),
        default="auto",
        help="the bring-up part also with real `fleet serve` + `fleet-agent` processes on a compressed clock "
        "(auto: at --scale small only; a few minutes)",
    )
    parser.add_argument(
        "--bringup-seed",
        type=int,
        default=42,
        help="the seed the bring-up's hall draws its faults from (default 42; other seeds show how much of the "
        "figure is where the faults fell)",
    )
    parser.add_argument(
        "--parts",
        default=",".join(PARTS),
        help=f"comma-separated parts to run (default all: {','.join(PARTS)})",
    )
    parser.add_argument(
        "--results", type=Path, default=REPO / "bench" / "results.json", help="where to write the figures as JSON"
    )
    args = parser.parse_args(argv)
    if args.scale == SMALL:
        args.runs = 1
    small = args.scale == SMALL
    args.targets = args.targets or (100_000 if small else 1_000_000)
    args.history = args.history or (100_000 if small else 1_000_000)
    args.agent_seconds = args.agent_seconds or (8.0 if small else 20.0)
    args.clients = args.clients or (10 if small else 50)
    args.dashboard_sizes = (
        tuple(int(n) for n in args.dashboard_devices.split(",")) if args.dashboard_devices else (1_000, 100_000)
    )
    args.history_depths = tuple(sorted({int(n) for n in args.history_depths.split(",") if n.strip()}))
    if not args.history_depths or min(args.history_depths) < 1:
        parser.error("--history-depths: give attempts per target of at least 1, e.g. 1,8")
    args.parts = {p.strip() for p in args.parts.split(",") if p.strip()}
    unknown = args.parts - set(PARTS)
    if unknown:
        parser.error(f"unknown parts {sorted(unknown)}; choose from {', '.join(PARTS)}")
    return args


def _sizes(largest: int, steps: tuple[int, ...]) -> tuple[int, ...]:
    """The standard sizes below `largest`, and `largest` itself."""
    return tuple(sorted({s for s in steps if s < largest} | {largest}))


def _configure() -> None:
    """Settings read at import time: these must be in the environment before Django starts."""
    sys.path.insert(0, str(REPO))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "fleet.settings")
    # Django prefixes nothing when TEST NAME is set: this is the database we create and drop.
    os.environ["FLEET_TEST_DB_NAME"] = f"test_fleet_bench_{os.getpid()}"
    os.environ.setdefault("FLEET_LOG_LEVEL", "WARNING")
    os.environ.setdefault("FLEET_REQUEST_LOG_LEVEL", "WARNING")  # a line per test-client request otherwise
    # Bulk loads of a million rows take longer than a request may: the limits of a command.
    os.environ.setdefault("FLEET_PROCESS_ROLE", "command")
    # A batch-1 HTTP run sends hundreds of requests a second from one client; the production
    # rate limit would turn the measurement into a measurement of 429s.
    os.environ.setdefault("FLEET_THROTTLE_CLIENT", "10000000/min")
    # The bench signs certificates with a key of its own, never the service's (docs/security.md):
    # minted once under .fleet/bench, published only in the throwaway database.
    os.environ.setdefault("FLEET_CERTIFICATE_KEY_FILE", str(REPO / ".fleet" / "bench" / "certificate_key.pem"))


@contextlib.contextmanager
def bench_database() -> Iterator[None]:
    """The throwaway database `test_fleet_bench_<pid>`, created and migrated, with the bench's
    signing key published in it (`bench_key_publish`); dropped at the end, also after a failure or
    Ctrl-C. Call after `_configure()` and `django.setup()`."""
    from django.db import connection

    original_name = connection.settings_dict["NAME"]
    try:
        connection.creation.create_test_db(verbosity=0, autoclobber=True, serialize=False)
        bench_key_publish()
        yield
    finally:
        # create_test_db renames the connection's database only once it exists: drop it then,
        # even when migrating or the benchmark failed halfway.
        if connection.settings_dict["NAME"] != original_name:
            connection.creation.destroy_test_db(original_name, verbosity=0)


def _database_empty() -> None:
    """Every table of the throwaway database emptied (`manage.py flush`), its signing key published again."""
    from django.core.management import call_command

    call_command("flush", interactive=False, verbosity=0)
    bench_key_publish()


def bench_key_publish() -> None:
    """Mint the bench's own key if it has none yet and publish it (again after a TRUNCATE)."""
    from fleet.burnin.certificates.signing import signing_key_init

    signing_key_init()


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

    from bench.agents import concurrent_measure
    from bench.anchor import anchor_measure
    from bench.clients import AgentClient
    from bench.dashboard import dashboard_measure, dashboard_scale_measure
    from bench.history import history_measure
    from bench.pending import DEFAULT_SIZES as PENDING_SIZES
    from bench.pending import pending_measure
    from bench.reconcile import reconcile_fill, reconcile_measure
    from bench.report import (
        agents_table,
        anchor_table,
        dashboard_scale_table,
        dashboard_table,
        history_table,
        machine_print,
        pending_table,
        ratio_table,
        reconcile_table,
        rerun_table,
        scale_table,
        table_print,
        upsert_table,
    )
    from bench.rerun import rerun_at_scale, rerun_measure
    from bench.results import results_build, results_write
    from bench.scale import DEFAULT_SIZES as SCALE_SIZES
    from bench.scale import scale_measure
    from bench.seed import evaluations_materialise, fleet_build
    from bench.upsert import upsert_measure
    from fleet.core.heap import freeze_loaded

    # Piped output (a log, a CI artefact) gets a width that fits the tables instead of rich's 80.
    out = Console(width=None if sys.stdout.isatty() else 130)
    log = Console(stderr=True)
    started = time.perf_counter()
    load = [os.getloadavg()[0]]

    def progress(message: str) -> None:
        log.print(f"[dim]{time.perf_counter() - started:6.1f}s  {message}[/dim]")

    if args.parts == {"bringup"}:
        return _bringup_only(args, out, progress, started, load)
    progress("building the fleet")
    fleet = fleet_build(scale=args.scale)
    progress(f"fleet: {len(fleet.device_ids):,} devices, {fleet.target_count:,} targets")
    http = None
    if not args.no_http and args.parts & {"upsert", "reconcile"}:
        http = AgentClient(fleet.satellite, ["test-execution:evaluate", "burn-in-policy-progress:write"])
    # The harness's fleet lives the whole run, as what a `fleet serve` worker loaded lives as long as
    # the worker: frozen the same way (fleet.core.heap), so a full collection inside a measured call
    # walks what the measured code made, not the harness's data (at scale 0.5, 182,000 objects, one took
    # about 120 ms, every tenth 500-item upsert).
    progress(f"{freeze_loaded():,} objects frozen (as a fleet serve worker freezes what it loaded)")
    parts = args.parts
    upserts = (
        upsert_measure(fleet, scale=args.scale, runs=args.runs, http=http, progress=progress)
        if "upsert" in parts
        else []
    )
    progress("materialising evaluations for reconcile")
    evaluations_materialise(fleet)
    reconciles = reconcile_measure(fleet, runs=args.runs, http=http, progress=progress) if "reconcile" in parts else []
    if "reconcile" not in parts and parts & {"rerun", "dashboard"}:
        reconcile_fill(fleet, progress=progress)
    reruns = rerun_measure(fleet, scale=args.scale, runs=args.runs, progress=progress) if "rerun" in parts else []
    anchors = []
    if "anchor" in parts:
        progress("anchor: raw PostgreSQL upsert")
        anchors = anchor_measure(scale=args.scale, runs=args.runs)
    scales = (
        scale_measure(fleet, sizes=_sizes(args.targets, SCALE_SIZES), first_pages=args.first_pages, progress=progress)
        if "scale" in parts
        else []
    )
    if "rerun" in parts and scales:
        big = rerun_at_scale(f"scale-{scales[-1].targets}", size=RERUN_AT_SCALE, runs=1, progress=progress)
        if big is not None:
            reruns.append(big)
    pendings = (
        pending_measure(fleet, sizes=_sizes(args.history, PENDING_SIZES), runs=args.runs, progress=progress)
        if "pending" in parts
        else []
    )
    agents = (
        concurrent_measure(
            fleet, clients=args.clients, seconds=args.agent_seconds, workers=args.workers, progress=progress
        )
        if "concurrent" in parts
        else None
    )
    pages = dashboard_measure(fleet, runs=args.runs, progress=progress) if "dashboard" in parts else []
    page_scales = (
        dashboard_scale_measure(fleet, sizes=args.dashboard_sizes, runs=args.runs, progress=progress)
        if "dashboard100k" in parts
        else []
    )
    # Last: it deepens the bench fleet's history in place, which every part above reads as built.
    histories = (
        history_measure(fleet, depths=args.history_depths, runs=args.runs, progress=progress)
        if "history" in parts
        else []
    )
    elapsed = time.perf_counter() - started
    load.append(os.getloadavg()[0])

    out.print()
    machine_print(out, _machine(load), scale=args.scale, runs=args.runs)
    tables = []
    if upserts:
        tables.append(upsert_table(upserts, args.runs))
    if reconciles:
        tables.append(reconcile_table(reconciles, args.runs))
    if histories:
        tables.append(history_table(histories, args.runs))
    if reruns:
        tables.append(rerun_table(reruns, args.runs))
    if anchors:
        tables.append(anchor_table(anchors, args.runs))
        tables.append(ratio_table(upserts, reconciles, anchors, histories))
    if scales:
        tables.append(scale_table(scales))
    if pendings:
        tables.append(pending_table(pendings))
    if agents:
        tables.append(agents_table(agents))
    if pages:
        tables.append(dashboard_table(pages))
    if page_scales:
        tables.append(dashboard_scale_table(page_scales))
    for table in tables:
        table_print(out, table)
    results = results_build(
        scale=args.scale,
        load=load,
        upserts=upserts,
        reconciles=reconciles,
        reruns=reruns,
        anchors=anchors,
        scales=scales,
        pendings=pendings,
        agents=agents,
        pages=pages,
        page_scales=page_scales,
        histories=histories,
    )
    results["fleet_devices"] = len(fleet.device_ids)  # the dashboard's and the rerun table's fleet
    if "bringup" in parts:  # last, on an emptied database
        # written first: a bring-up that fails keeps the figures above
        results_write(results, args.results)
        # The halls' policies are per resource class, as the bench fleet's are: on the same database the
        # bring-up's H200 nodes would also run the bench policy's six requirements (which its model cannot time).
        progress("emptying the database for the bring-up")
        _database_empty()
        results |= _bringup(args, out, progress)
    results_write(results, args.results)
    out.print(f"figures written to {args.results}")
    problems = [
        p
        for row in (
            *upserts,
            *reconciles,
            *reruns,
            *scales,
            *pendings,
            *pages,
            *page_scales,
            *histories,
            *([agents] if agents else []),
        )
        for p in row.problems
    ]
    for problem in problems:
        out.print(f"[bold red]check failed:[/bold red] {problem}")
    out.print(f"measured in {elapsed:.0f} s (fleet setup included; database setup and teardown not)")
    return 1 if problems else 0


def _bringup(args: argparse.Namespace, out, progress) -> dict:
    """The bring-up part (bench/bringup.py): its figures, printed and returned for results.json."""
    from bench.bringup import GOALS, bringup_figures, bringup_measure

    run, wrong = bringup_measure(scale=args.scale, progress=progress, seed=args.bringup_seed)
    figures = bringup_figures(run, wrong) | {"bringup_seed": args.bringup_seed}
    ratio = figures["bringup_time_vs_lower_bound"]
    out.print()
    out.print(
        f"[bold]Bring-up[/bold] of a simulated hall of {run.devices} devices (faults of seed {args.bringup_seed}), "
        f"at most {run.max_under_test} under test "
        "(the autopilot and every service real, on PostgreSQL; agents and hardware simulated on a simulated clock)"
    )
    where = run.where
    out.print(
        "  time to accept every device without a fault: "
        + (f"{run.time_h:.1f} h" if run.time_h is not None else "not reached")
        + f"; lower bound {run.lower_bound_h:.1f} h = max(critical path {run.critical_path_h:.1f} h of "
        f"{run.critical_rack}, capacity {run.capacity_bound_h:.1f} h) → {ratio if ratio is not None else '—'} "
        f"(goal ≤ {GOALS['time']})"
    )
    out.print(
        f"  where it went: the last device's first job started at {where['last_first_job_h']} h; the last entered "
        f"repair at {where['last_entered_repair_h']} h; slots in use {where['slot_use']:.0%} of the run; "
        f"accepted last: {where.get('last_rack')}"
    )
    out.print(
        f"  device-hours in tests {run.test_hours:.0f} of a minimum {run.minimum_hours:.0f} → "
        f"{figures['bringup_test_hours_vs_minimum']} (goal ≤ {GOALS['hours']})"
    )
    out.print(
        f"  escapes {run.escapes} (goal 0); false repairs {run.false_repairs} of {run.good_devices} good devices "
        f"({figures['bringup_false_repairs_share']:.2%}, goal ≤ {GOALS['false_repairs_share']:.1%}); "
        f"most under test at once {run.max_under_test_seen} (limit {run.max_under_test}); {run.passes} passes; "
        f"actions {run.actions}; {run.wall_s:.0f} s of wall time"
    )
    out.print(
        f"  wrong threshold failing a whole class ({wrong.devices} devices): {wrong.sent_to_repair} sent to repair "
        f"(breaker limit {wrong.breaker_limit}, minimum {wrong.breaker_minimum}); breaker "
        f"{'opened' if wrong.breaker_opened else 'did not open'}; {wrong.dispatched_after_open} dispatches of the "
        "autopilot after it opened"
    )
    if args.bringup_processes == "on" or (args.bringup_processes == "auto" and args.scale == SMALL):
        figures |= _bringup_processes(args, out, progress)
    return figures


def _bringup_processes(args: argparse.Namespace, out, progress) -> dict:
    """The same hall's bring-up with real `fleet serve` and `fleet-agent` processes (bench/bringup_processes.py)."""
    from bench.bringup import GOALS
    from bench.bringup_processes import processes_measure

    run = processes_measure(scale=args.scale, progress=progress)
    figures = run.figures()
    out.print(
        f"[bold]Bring-up with real processes[/bold]: `fleet serve` (its autopilot) and a `fleet-agent` (simulated "
        f"executor, a simulated minute = {60 * run.time_scale:.2f} s), {run.devices} devices, faults {run.faults}"
    )
    out.print(
        "  time to accept every device without a fault: "
        + (f"{run.time_h:.1f} h" if run.time_h is not None else "not reached")
        + f"; lower bound {run.lower_bound_h:.1f} h (critical path {run.critical_path_h:.1f} h of "
        f"{run.critical_rack}, capacity {run.capacity_bound_h:.1f} h) → "
        f"{figures['bringup_processes_time_vs_lower_bound']} (goal ≤ {GOALS['time']})"
    )
    out.print(
        f"  device-hours in tests ÷ minimum {figures['bringup_processes_test_hours_vs_minimum']}; escapes "
        f"{run.escapes}; false repairs {run.false_repairs} of {run.good_devices}; most under test at once "
        f"{run.max_under_test_seen} (sampled every 0.25 s); actions {run.actions}; {run.wall_s:.0f} s of wall time"
    )
    return figures


def _bringup_only(args: argparse.Namespace, out, progress, started: float, load: list[float]) -> int:
    """`--parts bringup` alone: no bench fleet to build."""
    import json

    figures = _bringup(args, out, progress)
    load.append(os.getloadavg()[0])
    path = Path(args.results)
    merged = json.loads(path.read_text()) if path.exists() else {}
    merged |= figures
    path.write_text(json.dumps(merged, indent=2, sort_keys=True) + "\n")
    out.print(f"figures written to {args.results} (merged into what it held)")
    out.print(f"measured in {time.perf_counter() - started:.0f} s")
    return 0


def main(argv: list[str] | None = None) -> int:
    args = _arguments(argv)
    _configure()
    import django

    django.setup()
    with bench_database():
        return _benchmark(args)


if __name__ == "__main__":
    sys.exit(main())
