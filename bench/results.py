"""bench/results.json: the figures the performance goals are read from, one key each.

A goal this run did not measure has `null` and is named in `not_measured`, never a guess.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from bench.agents import ConcurrentResult
from bench.anchor import AnchorRow
from bench.dashboard import DashboardRow, DashboardScale
from bench.history import HistoryRow
from bench.pending import PendingRow
from bench.reconcile import WITHOUT_CERTIFICATES, ReconcileRow
from bench.rerun import RerunRow
from bench.scale import ScaleRow
from bench.upsert import UpsertRow

#: Keys the issue asks for that this benchmark does not measure yet.
NOT_MEASURED: tuple[str, ...] = ()


def _counts(values: list[int]) -> int | str:
    return values[0] if len(set(values)) == 1 else f"{min(values)}-{max(values)}"


def results_build(
    *,
    scale: float,
    load: list[float],
    upserts: list[UpsertRow],
    reconciles: list[ReconcileRow],
    reruns: list[RerunRow],
    anchors: list[AnchorRow],
    scales: list[ScaleRow],
    pendings: list[PendingRow],
    agents: ConcurrentResult | None,
    pages: list[DashboardRow],
    page_scales: list[DashboardScale],
    histories: list[HistoryRow] | None = None,
) -> dict[str, Any]:
    ordinary = next((a for a in anchors if a.table == "ordinary"), None)
    raw_insert = ordinary.insert_rate if ordinary else float("nan")
    raw_update = ordinary.update_rate if ordinary else float("nan")
    by_path = {(r.path, r.limit): r for r in reconciles}
    service = by_path.get(("service", 500))
    stale = by_path.get(("service, stale stats", 500))
    http = by_path.get(("HTTP", 500))
    uncertified = by_path.get((WITHOUT_CERTIFICATES, 500))

    def rate(row: ReconcileRow | None, which: str) -> float | None:
        if row is None:
            return None
        sweep = getattr(row, which)
        return sweep.target_count / sweep.seconds

    upsert = {(u.path, u.batch): u for u in upserts}

    def upsert_rates(path: str) -> dict[str, float] | None:
        row = upsert.get((path, 500))
        return None if row is None else {m: row.modes[m].timing.rate(row.items) for m in row.modes}

    service_upsert, http_upsert = upsert_rates("service"), upsert_rates("HTTP")

    def vs_raw(rates: dict[str, float] | None) -> dict[str, float] | None:
        if rates is None:
            return None
        return {m: round(v / (raw_insert if m == "insert" else raw_update), 3) for m, v in rates.items()}

    sweep1, sweep2 = rate(service, "first"), rate(service, "second")
    largest = max(reruns, key=lambda r: r.devices) if reruns else None
    measured: dict[str, Any] = {}
    not_measured = list(NOT_MEASURED)
    if len(scales) > 1:
        base, top = scales[0], scales[-1]
        measured |= {
            # From the largest size this run built (1M unless --targets or SCALE=small said less).
            "page_time_ratio_1m_vs_10k": round(top.first.median_page_ms / base.first.median_page_ms, 3),
            "page_time_ratio_steady_1m_vs_10k": round(top.second.median_page_ms / base.second.median_page_ms, 3),
            "page_time_ratio_sizes": [base.targets, top.targets],
            "reconcile_median_page_ms_by_targets": {
                str(r.targets): {
                    "sweep_1": round(r.first.median_page_ms, 2),
                    "sweep_2": round(r.second.median_page_ms, 2),
                }
                for r in scales
            },
            "server_peak_rss_growth_mb": round(top.rss_growth_mb, 1),
        }
    else:
        not_measured += ["page_time_ratio_1m_vs_10k", "server_peak_rss_growth_mb"]
    if len(pendings) > 1:
        base_p, top_p = pendings[0], pendings[-1]
        measured |= {
            "pending_first_page_ratio_1m_vs_10k": round(top_p.median_page_ms / base_p.median_page_ms, 3),
            "pending_first_page_ratio_sizes": [base_p.history, top_p.history],
            "pending_first_page_ms_by_history": {str(r.history): round(r.median_page_ms, 2) for r in pendings},
            "pending_first_read_ms_by_history": {str(r.history): round(r.first_read_seconds * 1000) for r in pendings},
        }
    else:
        not_measured.append("pending_first_page_ratio_1m_vs_10k")
    big = next((r for r in reruns if r.devices == 10_000), None)
    if big is not None:
        measured |= {"dispatch_10k_s": round(big.dispatch.seconds, 2), "preview_10k_s": round(big.preview.seconds, 2)}
    else:
        not_measured += ["dispatch_10k_s", "preview_10k_s"]
    if agents is not None and len(agents.runs) > 1:
        one, many = agents.runs[0], agents.runs[-1]
        measured |= {
            "concurrent_p99_ms": round(many.page_p99_ms, 1),
            "concurrent_clients": many.clients,
            "concurrent": {
                str(r.clients): {
                    "page_p50_ms": round(r.page_p50_ms, 1),
                    "page_p99_ms": round(r.page_p99_ms, 1),
                    "upsert_p50_ms": round(r.upsert_p50_ms, 1),
                    "upsert_p99_ms": round(r.upsert_p99_ms, 1),
                    "requests_per_s": round(r.requests_per_s, 1),
                    "targets_per_s": round(r.targets_per_s),
                    "upsert_items_per_s": round(r.items_per_s),
                    "workers": r.workers,
                    "shed_503": r.errors.get(503, 0),
                    "requests": len(r.page_latencies) + len(r.upsert_latencies),
                }
                for r in agents.runs
            },
            "concurrent_throughput_vs_one": round(many.requests_per_s / one.requests_per_s, 2),
        }
    else:
        not_measured.append("concurrent_p99_ms")
    if pages:
        measured["dashboard_page_ms"] = {r.page: round(r.median_ms, 1) for r in pages}
    if page_scales:
        # From the largest site the run built (100,000 devices unless --dashboard-devices said otherwise).
        measured["dashboard_page_ms_100k"] = {r.page: round(r.median_ms, 1) for r in page_scales[-1].pages}
        measured["dashboard_queries_100k"] = {r.page: r.queries for r in page_scales[-1].pages}
        measured["dashboard_page_sizes"] = {
            str(s.devices): {
                "devices": s.devices,
                "targets": s.targets,
                "seed_s": round(s.seed_seconds, 1),
                "certify_s": round(s.certify_seconds, 1),
                "certificates": s.certified,
                "page_ms": {r.page: round(r.median_ms, 1) for r in s.pages},
                "queries": {r.page: r.queries for r in s.pages},
            }
            for s in page_scales
        }
    else:
        not_measured.append("dashboard_page_ms_100k")
    if histories:
        measured |= _history_figures(histories, raw_insert, raw_update)
    else:
        not_measured.append("reconcile_vs_raw_history8")
    return {
        "scale": scale,
        "load_average_start": load[0],
        "load_average_end": load[-1],
        "raw_upsert_rows_per_s": round(raw_insert) if ordinary else None,
        "raw_conflict_update_rows_per_s": round(raw_update) if ordinary else None,
        "reconcile_targets_per_s": None if sweep1 is None else round(sweep1),
        "reconcile_steady_targets_per_s": None if sweep2 is None else round(sweep2),
        "reconcile_vs_raw": None if sweep1 is None else round(sweep1 / raw_insert, 3),
        "reconcile_stale_stats_vs_raw": None if stale is None else round(rate(stale, "first") / raw_insert, 3),
        "reconcile_http_vs_raw": None if http is None else round(rate(http, "first") / raw_insert, 3),
        "reconcile_without_certificates_vs_raw": None
        if uncertified is None
        else round(rate(uncertified, "first") / raw_insert, 3),
        "reconcile_steady_speedup": None if not (sweep1 and sweep2) else round(sweep2 / sweep1, 2),
        "reconcile_median_page_ms": None
        if service is None
        else {"sweep_1": round(service.first.median_page_ms, 2), "sweep_2": round(service.second.median_page_ms, 2)},
        "upsert_results_per_s": service_upsert and {m: round(v) for m, v in service_upsert.items()},
        "upsert_vs_raw": vs_raw(service_upsert),
        "upsert_http_vs_raw": vs_raw(http_upsert),
        "rerun_largest_selection": None
        if largest is None
        else {"devices": largest.devices, "preview_s": largest.preview.seconds, "dispatch_s": largest.dispatch.seconds},
        "queries_per_reconcile_page": {
            str(r.limit): _counts(r.first.queries[1:-1] or r.first.queries) for r in reconciles if r.path == "service"
        },
        "queries_per_upsert": {
            str(u.batch): _counts(u.modes["insert"].queries.counts) for u in upserts if u.path == "service"
        },
        "queries_per_dispatch": {str(r.devices): _counts(r.dispatch_queries_counts) for r in reruns},
        **dict.fromkeys(not_measured),
        **measured,
        "not_measured": not_measured,
    }


def _history_figures(histories: list[HistoryRow], raw_insert: float, raw_update: float) -> dict[str, Any]:
    """Per depth, the first sweep over raw inserts and the steady one over raw conflict-updates (as
    the ratio table divides them), the median pages; and from the smallest depth to the largest,
    the first sweep's rate and each sweep's median page time as growth factors."""
    figures: dict[str, Any] = {}

    def ratio(rate: float, raw: float) -> float | None:
        return None if math.isnan(raw) else round(rate / raw, 3)  # no anchor in this run: null

    for h in histories:
        first, second = h.row.first, h.row.second
        figures[f"reconcile_vs_raw_history{h.depth}"] = ratio(first.target_count / first.seconds, raw_insert)
        figures[f"reconcile_steady_vs_raw_history{h.depth}"] = ratio(second.target_count / second.seconds, raw_update)
        figures[f"reconcile_steady_speedup_history{h.depth}"] = round(first.seconds / second.seconds, 2)
    figures["reconcile_history_depths"] = [h.depth for h in histories]
    figures["reconcile_median_page_ms_by_history"] = {
        str(h.depth): {
            "sweep_1": round(h.row.first.median_page_ms, 2),
            "sweep_2": round(h.row.second.median_page_ms, 2),
            "executions": h.executions,
            "repairs": h.repairs,
        }
        for h in histories
    }
    base, top = histories[0].row, histories[-1].row
    figures["reconcile_history_first_sweep_rate_ratio"] = round(base.first.seconds / top.first.seconds, 3)
    figures["reconcile_history_page_time_growth"] = {
        "sweep_1": round(top.first.median_page_ms / base.first.median_page_ms, 3),
        "sweep_2": round(top.second.median_page_ms / base.second.median_page_ms, 3),
    }
    figures["queries_per_reconcile_page_by_history"] = {
        str(h.depth): _counts(h.row.first.queries[1:-1] or h.row.first.queries) for h in histories
    }
    return figures


def results_write(results: dict[str, Any], path: Path) -> None:
    path.write_text(json.dumps(results, indent=2, sort_keys=True) + "\n")
