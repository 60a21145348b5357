"""CPU time of the reconcile's first and steady sweeps: this process's and its PostgreSQL backend's.

    python bench/sweep_cpu.py [--scale small] [--depth 1] [--sweeps 7]

On a machine other work keeps busy, a sweep's wall time moves ±30 % from run to run and the raw
anchor moves differently again (STACK-NOTES, "the noisy half of a ratio"); the CPU the sweep itself
spends moves much less. This builds the bench fleet (at `--depth` attempts per target, as the
`history` part does) in a throwaway database, then times `--sweeps` pairs of service sweeps (limit
500: from an empty projection, then steady) and prints the medians of wall time, of this process's
CPU time (`time.process_time`) and of the backend's (utime + stime of its `/proc/<pid>/stat`: the
server must run on this machine). Run it alternately on clean clones of the commits to compare,
each with its own code on PYTHONPATH (the script reads only `bench.seed`, `bench.reconcile` and,
for a depth above 1, `bench.history` of the checkout it runs in).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def _backend_cpu(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scale", default="small", help="as bench/run.py (default small = 0.2)")
    parser.add_argument("--depth", type=int, default=1, help="attempts per target (default 1)")
    parser.add_argument("--sweeps", type=int, default=7, help="sweep pairs timed (default 7)")
    args = parser.parse_args(argv)
    scale = 0.2 if args.scale == "small" else float(args.scale)

    sys.path.insert(0, str(REPO))
    from bench.run import _configure, bench_database

    _configure()
    import django

    django.setup()
    from django.db import connection

    with bench_database():
        from bench.reconcile import _service_pages, _sweep, _truncate
        from bench.seed import evaluations_materialise, fleet_build

        fleet = fleet_build(scale=scale)
        evaluations_materialise(fleet)
        if args.depth > 1:
            from bench.history import history_deepen

            history_deepen(fleet, have=1, depth=args.depth)
        with connection.cursor() as cursor:
            cursor.execute("ANALYZE")
            cursor.execute("SELECT pg_backend_pid()")
            (pid,) = cursor.fetchone()
        _truncate()  # one untimed pair: caches and the process warm
        _sweep(_service_pages, fleet, 500)
        _sweep(_service_pages, fleet, 500)
        figures: dict[str, list[float]] = {}
        for _ in range(args.sweeps):
            _truncate()
            for sweep in ("first", "steady"):
                client, server, wall = time.process_time(), _backend_cpu(pid), time.perf_counter()
                _sweep(_service_pages, fleet, 500)
                figures.setdefault(f"{sweep} wall", []).append(time.perf_counter() - wall)
                figures.setdefault(f"{sweep} client cpu", []).append(time.process_time() - client)
                figures.setdefault(f"{sweep} server cpu", []).append(_backend_cpu(pid) - server)
        totals = [c + s for c, s in zip(figures["first client cpu"], figures["first server cpu"], strict=True)]
        figures["first cpu (client + server)"] = totals
        print(
            f"depth {args.depth}, {args.sweeps} pairs, median ms: "
            + ", ".join(f"{name} {statistics.median(values) * 1000:.0f}" for name, values in figures.items())
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
