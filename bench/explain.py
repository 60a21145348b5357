"""What each statement of a reconcile page costs, at history depths 1 and 8.

    python bench/explain.py [--scale small] [--depths 1,8] [--plans]

Builds the bench fleet (bench/seed.py) in a throwaway database as bench/run.py does, deepens it
as the `history` part does (bench/history.py), and at each depth runs a first sweep (from an
empty projection) and a steady one, limit 500, service path. Every statement a page sends is first
run under `EXPLAIN (ANALYZE, BUFFERS)` inside a savepoint that is rolled back, then for real: the
plan is the statement's own, in the state the page met. Printed per depth and sweep: each
statement's calls, execution time and shared buffers (hit + read) summed over the sweep, and with
`--plans` the plan of each statement on the sweep's second page. The times are EXPLAIN's (with its
per-node clock overhead), for comparing statements with each other, not for the ratios.
"""

from __future__ import annotations

import argparse
import sys
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]


@dataclass
class StatementCost:
    calls: int = 0
    ms: float = 0.0
    planning_ms: float = 0.0
    hit: int = 0
    read: int = 0
    dirtied: int = 0
    plan: str = ""  # of the second page

    @property
    def buffers(self) -> int:
        return self.hit + self.read


@dataclass
class Explained:
    """Per statement name, what the statements of one sweep cost."""

    costs: dict[str, StatementCost] = field(default_factory=lambda: defaultdict(StatementCost))
    page: int = 0


def _name(text: str) -> str:
    from fleet.core.statements import REGISTRY

    for name, statement in REGISTRY.items():
        if statement.text == text:
            return name
    if "FROM page" in text and "LEFT JOIN LATERAL" in text:
        return "burnin.reconcile.page"
    return "ORM: " + " ".join(text.split())[:70]


def _totals(node: dict[str, Any]) -> tuple[int, int, int]:
    return (
        node.get("Shared Hit Blocks", 0),
        node.get("Shared Read Blocks", 0),
        node.get("Shared Dirtied Blocks", 0),
    )


def _wrapper(explained: Explained, plans: bool) -> Callable[..., Any]:
    from django.db import connection

    def explain(execute, sql, params, many, context):  # type: ignore[no-untyped-def]
        head = sql.lstrip().split(None, 1)[0].upper() if sql.strip() else ""
        if many or head not in {"SELECT", "WITH", "INSERT", "UPDATE", "DELETE"}:
            return execute(sql, params, many, context)
        raw = connection.connection.cursor()
        atomic = connection.in_atomic_block

        def undone(options: str) -> list[Any]:
            """EXPLAIN ANALYZE runs the statement: in a page's transaction, undo it at once."""
            if atomic:
                raw.execute("SAVEPOINT bench_explain")
            raw.execute(f"EXPLAIN ({options}) " + sql, params)
            result = raw.fetchall()
            if atomic:
                raw.execute("ROLLBACK TO SAVEPOINT bench_explain")
                raw.execute("RELEASE SAVEPOINT bench_explain")
            return result

        ((document,),) = undone("ANALYZE, BUFFERS, FORMAT JSON")
        text = "\n".join(r[0] for r in undone("ANALYZE, BUFFERS")) if plans and explained.page == 2 else ""
        raw.close()
        top = document[0]
        cost = explained.costs[_name(sql)]
        cost.calls += 1
        cost.ms += top["Execution Time"]
        cost.planning_ms += top.get("Planning Time", 0.0)
        hit, read, dirtied = _totals(top["Plan"])
        cost.hit += hit
        cost.read += read
        cost.dirtied += dirtied
        if text and not cost.plan:
            cost.plan = text
        return execute(sql, params, many, context)

    return explain


def _sweep(fleet: Any, plans: bool) -> Explained:
    from django.db import connection

    from bench.reconcile import _scope, _service_pages
    from fleet.burnin.reconcile.service import ReconcilePage, reconcile_sweep

    explained = Explained()
    fetch = _service_pages(fleet, 500)

    def page(cursor: str | None) -> ReconcilePage:
        explained.page += 1
        with connection.execute_wrapper(_wrapper(explained, plans)):
            return fetch(cursor)

    reconcile_sweep(**_scope(fleet, 500), fetch_page=page)
    return explained


def _print(label: str, explained: Explained, plans: bool) -> None:
    total = sum(c.buffers for c in explained.costs.values())
    total_ms = sum(c.ms for c in explained.costs.values())
    print(f"\n## {label}: {explained.page} pages, {total:,} shared buffers, {total_ms:,.0f} ms executing")
    print(f"{'statement':<62} {'calls':>5} {'ms':>8} {'plan ms':>8} {'hit':>9} {'read':>7} {'dirtied':>7}")
    for name, c in sorted(explained.costs.items(), key=lambda item: -item[1].ms):
        figures = f"{c.calls:>5} {c.ms:>8.1f} {c.planning_ms:>8.1f} {c.hit:>9,} {c.read:>7,} {c.dirtied:>7,}"
        print(f"{name[:62]:<62} {figures}")
    if plans:
        for name, c in explained.costs.items():
            if c.plan and not name.startswith("ORM"):
                print(f"\n### {name}, second page\n{c.plan}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scale", default="small", help="as bench/run.py (default small = 0.2)")
    parser.add_argument("--depths", default="1,8", help="attempts per target (default 1,8)")
    parser.add_argument("--plans", action="store_true", help="print each statement's plan on the second page")
    args = parser.parse_args(argv)
    scale = 0.2 if args.scale == "small" else float(args.scale)
    depths = sorted({int(d) for d in args.depths.split(",")})

    sys.path.insert(0, str(REPO))
    from bench.run import _configure, bench_database

    _configure()
    import django

    django.setup()
    from django.db import connection

    with bench_database():
        from bench.history import history_deepen
        from bench.reconcile import _truncate
        from bench.seed import evaluations_materialise, fleet_build

        fleet = fleet_build(scale=scale)
        evaluations_materialise(fleet)
        have = 1
        for depth in depths:
            history_deepen(fleet, have=have, depth=depth)
            have = max(have, depth)
            with connection.cursor() as cursor:
                cursor.execute("ANALYZE")
            _truncate()
            _print(f"depth {depth}, first sweep", _sweep(fleet, args.plans), args.plans)
            _print(f"depth {depth}, steady sweep", _sweep(fleet, args.plans), args.plans)
    return 0


if __name__ == "__main__":
    sys.exit(main())
