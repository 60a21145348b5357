"""Tables of the benchmark's figures, and their ratios to the raw PostgreSQL anchor."""

from __future__ import annotations

from dataclasses import dataclass

from rich.console import Console
from rich.table import Table

from bench.agents import ConcurrentResult
from bench.anchor import AnchorRow
from bench.dashboard import DashboardRow, DashboardScale
from bench.history import HistoryRow
from bench.pending import PendingRow
from bench.reconcile import ReconcileRow
from bench.rerun import RerunRow
from bench.scale import ScaleRow
from bench.timing import CHEAP_SECONDS, Timing
from bench.upsert import MODES, UpsertRow


@dataclass(frozen=True)
class Machine:
    cpus: int
    postgres: str
    server: str
    settings: str  # fsync, synchronous_commit, shared_buffers
    load: str  # other work on the machine moves every figure; say how much there was
    software: str


def _k(value: float) -> str:
    return f"{value / 1000:,.1f}k" if value >= 1000 else f"{value:,.0f}"


def _once(timing: Timing, runs: int) -> str:
    """Marks a figure that was measured once (its run was too long to repeat)."""
    return "*" if timing.runs < runs else ""


def _table(title: str, columns: list[str], left: tuple[str, ...] = ()) -> Table:
    table = Table(title=title)
    for name in columns:
        table.add_column(name, justify="left" if name in left else "right")
    return table


def table_print(console: Console, table: Table) -> None:
    """Title and caption as lines of their own: rich would wrap them to the table's width."""
    title, caption = table.title, table.caption
    table.title = table.caption = None
    console.print()
    console.print(f"[bold]{title}[/bold]")
    console.print(table)
    if caption:
        console.print(f"[dim]{caption}[/dim]")


def machine_print(console: Console, machine: Machine, *, scale: float, runs: int) -> None:
    console.print(f"[bold]fleet-burnin benchmark[/bold]: scale {scale:g}; median of {runs} runs per figure")
    console.print(f"machine: {machine.cpus} CPU(s), {machine.load}; {machine.software}")
    console.print(f"PostgreSQL {machine.postgres} ({machine.server}); {machine.settings}")
    console.print(
        f"[dim]* = measured once: its first run took over {CHEAP_SECONDS:g} s. Query counts are per request "
        "as CaptureQueriesContext sees them (BEGIN/COMMIT/SAVEPOINT included), over every timed request.[/dim]"
    )


def upsert_table(rows: list[UpsertRow], runs: int) -> Table:
    table = _table(
        "1. Evaluation-results upsert: items/s, and queries per request (insert / replace / replay)",
        ["path", "batch", "items", "insert/s", "replace/s", "replay/s", "queries/request"],
        left=("path",),
    )
    for row in rows:
        modes = [row.modes[m] for m in MODES]
        table.add_row(
            row.path,
            str(row.batch),
            f"{row.items:,}",
            *(f"{_k(m.timing.rate(row.items))}{_once(m.timing, runs)}" for m in modes),
            " / ".join(m.queries.spread() for m in modes),
        )
    table.caption = (
        "insert: no stored result yet; replace: a re-evaluation with a new payload (ON CONFLICT DO UPDATE); "
        "replay: the same request again (all unchanged)."
    )
    return table


def reconcile_table(rows: list[ReconcileRow], runs: int) -> Table:
    table = _table(
        "2. Reconcile: full sweeps, scope load + page per request as the view does",
        [
            "path",
            "limit",
            "targets",
            "pages",
            "sweep 1 s",
            "targets/s",
            "sweep 2 s",
            "targets/s",
            "q/page sweep 1",
            "q/page sweep 2",
            "median page ms 1 / 2",
        ],
        left=("path",),
    )
    for row in rows:
        mark = "*" if row.runs < runs else ""
        table.add_row(
            row.path,
            str(row.limit),
            f"{row.first.target_count:,}",
            str(row.first.pages),
            f"{row.first.seconds:.2f}{mark}",
            _k(row.first.target_count / row.first.seconds),
            f"{row.second.seconds:.2f}{mark}",
            _k(row.second.target_count / row.second.seconds),
            row.first.describe_queries(),
            row.second.describe_queries(),
            f"{row.first.median_page_ms:.1f} / {row.second.median_page_ms:.1f}",
        )
    if rows:
        first, second = rows[0].first.counters, rows[0].second.counters
        table.caption = (
            f"sweep 1 starts from an empty projection: written {first['written']:,}, deferred {first['deferred']:,}; "
            f"sweep 2 repeats it: unchanged {second['unchanged']:,}, written {second['written']:,}, "
            f"deferred {second['deferred']:,} (unchanged rows are not rewritten: the scope's ReconcileSweep record "
            "carries its freshness).\n"
            "queries per page: first page / every page between / final page."
        )
    return table


def history_table(rows: list[HistoryRow], runs: int) -> Table:
    table = _table(
        "2b. Reconcile at history depth: service, limit 500, every target with an execution carrying `depth` attempts",
        [
            "attempts/target",
            "executions",
            "repairs",
            "sweep 1 s",
            "targets/s",
            "sweep 2 s",
            "targets/s",
            "q/page sweep 1",
            "q/page sweep 2",
            "median page ms 1 / 2",
            "page ms vs depth 1",
        ],
    )
    base = rows[0].row if rows else None
    for history in rows:
        row = history.row
        mark = "*" if row.runs < runs else ""
        growth = (
            f"{row.first.median_page_ms / base.first.median_page_ms:.2f} / "
            f"{row.second.median_page_ms / base.second.median_page_ms:.2f}"
            if base is not None
            else "–"
        )
        table.add_row(
            str(history.depth),
            f"{history.executions:,}",
            f"{history.repairs:,}",
            f"{row.first.seconds:.2f}{mark}",
            _k(row.first.target_count / row.first.seconds),
            f"{row.second.seconds:.2f}{mark}",
            _k(row.second.target_count / row.second.seconds),
            row.first.describe_queries(),
            row.second.describe_queries(),
            f"{row.first.median_page_ms:.1f} / {row.second.median_page_ms:.1f}",
            growth,
        )
    table.caption = (
        "earlier attempts one day apart before each latest: failed, errored, passed, …, each evaluated; from 5 "
        "attempts on, a repair per device between the third and fourth earlier one (bench/history.py).\n"
        "page ms vs depth 1: median page time, first / steady sweep, over the same at depth 1."
    )
    return table


def rerun_table(rows: list[RerunRow], runs: int) -> Table:
    table = _table(
        "3. Rerun planning, mode non_passing (a random selection of the fleet's devices)",
        ["devices", "preview ms", "queries", "dispatch ms", "queries", "jobs", "skipped devices", "skip groups"],
    )
    for row in rows:
        table.add_row(
            f"{row.devices:,}",
            f"{row.preview.seconds * 1000:,.1f}{_once(row.preview, runs)}",
            row.preview_queries,
            f"{row.dispatch.seconds * 1000:,.1f}{_once(row.dispatch, runs)}",
            row.dispatch_queries,
            f"{row.jobs:,}",
            f"{row.skipped_devices:,}",
            f"{row.skip_groups:,}",
        )
    return table


def anchor_table(rows: list[AnchorRow], runs: int) -> Table:
    table = _table(
        "4. Anchor: raw INSERT … SELECT FROM unnest(…) ON CONFLICT DO UPDATE, 500-row batches, autocommit",
        ["table", "rows", "insert rows/s", "conflict-update rows/s"],
        left=("table",),
    )
    for row in rows:
        table.add_row(
            row.table,
            f"{row.rows:,}",
            f"{_k(row.insert_rate)}{_once(row.insert, runs)}",
            f"{_k(row.update_rate)}{_once(row.update, runs)}",
        )
    table.caption = "temporary: not WAL-logged (an upper bound); ordinary: pays WAL and commit like ours."
    return table


def ratio_table(
    upserts: list[UpsertRow],
    reconciles: list[ReconcileRow],
    anchors: list[AnchorRow],
    histories: list[HistoryRow] | None = None,
) -> Table:
    """Each figure over the raw rate of the same kind of write: inserts over raw inserts,
    replacements and no-op passes over raw conflict-updates."""
    temporary, ordinary = anchors
    table = _table(
        "Ratios: ours ÷ raw PostgreSQL rows/s (1.00 = no overhead over one bare statement per batch)",
        ["operation", "ours/s", "raw kind", "÷ raw temporary", "÷ raw ordinary"],
        left=("operation", "raw kind"),
    )

    def add(label: str, value: float, kind: str) -> None:
        if kind == "insert":
            t, o = temporary.insert_rate, ordinary.insert_rate
        else:
            t, o = temporary.update_rate, ordinary.update_rate
        table.add_row(label, _k(value), kind, f"{value / t:.2f}", f"{value / o:.2f}")

    for row in upserts:
        if row.batch == 500:
            for mode, kind in zip(MODES, ("insert", "update", "update"), strict=True):
                add(f"upsert {row.path}, batch 500, {mode}", row.modes[mode].timing.rate(row.items), kind)
    for sweeps in [*reconciles, *(h.row for h in histories or ())]:
        first, second = sweeps.first, sweeps.second
        add(f"reconcile {sweeps.path}, limit {sweeps.limit}, sweep 1", first.target_count / first.seconds, "insert")
        add(f"reconcile {sweeps.path}, limit {sweeps.limit}, sweep 2", second.target_count / second.seconds, "update")
    return table


def scale_table(rows: list[ScaleRow]) -> Table:
    table = _table(
        "Reconcile at fleet scale: one scope per size, limit 500, over HTTP against one `fleet serve` worker",
        [
            "targets",
            "devices",
            "sweep 1: median page",
            "p99",
            "first / last page",
            "sweep 2: median page",
            "p99",
            "first / last page",
            "server RSS start → peak",
        ],
    )
    for r in rows:
        table.add_row(
            f"{r.targets:,}",
            f"{r.devices:,}",
            f"{r.first.median_page_ms:.1f} ms",
            f"{r.first.p99_page_ms:.0f} ms",
            f"{r.first.first_page_ms:.0f} / {r.first.last_page_ms:.0f} ms",
            f"{r.second.median_page_ms:.1f} ms",
            f"{r.second.p99_page_ms:.0f} ms",
            f"{r.second.first_page_ms:.0f} / {r.second.last_page_ms:.0f} ms",
            f"{r.rss_start_mb:.0f} → {r.rss_peak_mb:.0f} MiB (+{r.rss_growth_mb:.1f})",
        )
    if len(rows) > 1:
        base, top = rows[0], rows[-1]
        table.caption = (
            f"median page at {top.targets:,} ÷ at {base.targets:,}: sweep 1 "
            f"{top.first.median_page_ms / base.first.median_page_ms:.2f}, sweep 2 "
            f"{top.second.median_page_ms / base.second.median_page_ms:.2f}. Sizes are built smallest first and kept, "
            "so the largest is measured with every table at its largest. The first page counts the sweep's "
            "targets, the last runs the cleanup."
        )
    return table


def pending_table(rows: list[PendingRow]) -> Table:
    table = _table(
        "Pending-evaluation feed: first page (limit 500) against the site's history",
        ["executions at the site", "pending", "first page (median)", "first read of the site (lists the pending once)"],
    )
    for r in rows:
        table.add_row(
            f"{r.history:,}", f"{r.pending:,}", f"{r.median_page_ms:.1f} ms", f"{r.first_read_seconds * 1000:.0f} ms"
        )
    if len(rows) > 1:
        table.caption = f"ratio {rows[-1].median_page_ms / rows[0].median_page_ms:.2f} (largest ÷ smallest)"
    return table


def agents_table(result: ConcurrentResult) -> Table:
    table = _table(
        "Many agents at once: each its own satellite and token, sweeping its scope (limit 500) and posting "
        "100-item upserts, against one `fleet serve`",
        [
            "clients",
            "workers",
            "reconcile page p50 / p99",
            "upsert p50 / p99",
            "requests/s",
            "targets/s",
            "upsert items/s",
            "503s (shed)",
        ],
    )
    for r in result.runs:
        table.add_row(
            str(r.clients),
            str(r.workers),
            f"{r.page_p50_ms:.0f} / {r.page_p99_ms:.0f} ms",
            f"{r.upsert_p50_ms:.0f} / {r.upsert_p99_ms:.0f} ms",
            f"{r.requests_per_s:.0f}",
            _k(r.targets_per_s),
            _k(r.items_per_s),
            f"{r.errors.get(503, 0)} of {len(r.page_latencies) + len(r.upsert_latencies)}",
        )
    if len(result.runs) > 1:
        one, many = result.runs[0], result.runs[-1]
        table.caption = (
            f"throughput {many.requests_per_s / one.requests_per_s:.2f} × one client's; p99 page latency "
            f"{many.page_p99_ms / one.page_p99_ms:.1f} × (clients, server and PostgreSQL share the machine's cores)"
        )
    return table


def dashboard_table(rows: list[DashboardRow]) -> Table:
    table = _table("Dashboard pages at the benchmark fleet (signed-in operator)", ["page", "median", "queries", "size"])
    for r in rows:
        table.add_row(f"{r.page} ({r.path})", f"{r.median_ms:.0f} ms", str(r.queries), f"{r.bytes / 1024:.0f} KiB")
    return table


def dashboard_scale_table(sizes: list[DashboardScale]) -> Table:
    table = _table(
        "Dashboard pages at fleet scale (part dashboard100k; bulk-loaded sites, signed-in operator)",
        ["page", *(f"{s.devices:,} devices" for s in sizes), "queries"],
    )
    for i, row in enumerate(sizes[0].pages):
        queries = {s.pages[i].queries for s in sizes}
        table.add_row(
            row.page,
            *(f"{s.pages[i].median_ms:.0f} ms" for s in sizes),
            " / ".join(str(s.pages[i].queries) for s in sizes) + ("" if len(queries) == 1 else " (varies!)"),
        )
    table.add_row(
        "seed (bulk) + certificates",
        *(f"{s.seed_seconds:.0f} s + {s.certify_seconds:.0f} s ({s.certified:,})" for s in sizes),
        "",
    )
    return table
