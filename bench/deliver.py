"""Events per second that `fleet deliver` delivers to a local webhook receiver.

    python bench/deliver.py [--events 3000] [--workers 1,2] [--subjects 0,10] [--results PATH]

In a throwaway database (`bench/run.py`'s: DATABASE_URL, else the embedded server), one
subscription points at the tests' receiver process (tests/support/webhook_receiver.py: it checks
every signature with plain `hmac` and appends each delivery to a file, as a real receiver does some
work). For each number of workers: the workers are started and warmed up (one event delivered),
then `--events` events are committed at once and timed until every delivery is recorded as
delivered in the database. `--subjects 0`: every event about another device (the common case);
`--subjects 10`: ten devices, so per-subject ordering (a subject's next delivery waits for the one
before) bounds what is in flight. Prints figures; asserts nothing about speed.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from bench.run import _configure, bench_database  # noqa: E402 - the repository on the path first


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _arguments(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", type=int, default=3000, help="events per measurement (3000)")
    parser.add_argument("--workers", default="1,2", help="numbers of `fleet deliver` processes to measure (1,2)")
    parser.add_argument("--subjects", default="0,10", help="devices the events are about; 0: each event another (0,10)")
    parser.add_argument("--concurrency", type=int, default=8, help="each worker's requests in flight (8)")
    parser.add_argument("--batch", type=int, default=100, help="each worker's deliveries per pass (100)")
    parser.add_argument("--results", type=Path, help="merge the figures into this JSON file")
    return parser.parse_args(argv)


def _measure(args: argparse.Namespace, url: str, workers: int, subjects: int, database: str) -> float:
    from django.utils import timezone

    from fleet.events.models import Delivery, Event
    from fleet.events.outbox import Draft, events_record
    from fleet_rules.vocabulary import DeliveryStatus, EventType

    Delivery.objects.all().delete()
    Event.objects.all().delete()

    def record(n: int, offset: int) -> None:
        events_record(
            [
                Draft(
                    EventType.DEVICE_NEEDS_REPAIR,
                    f"sites/bench/devices/n{(offset + i) % subjects if subjects else offset + i:06}",
                    None,
                    {"n": offset + i, "reason": "failed too often", "links": {"dashboard": "/sites/bench/"}},
                )
                for i in range(n)
            ],
            now=timezone.now(),
        )

    def delivered() -> int:
        return Delivery.objects.filter(status=DeliveryStatus.DELIVERED).count()

    env = {**os.environ, "DATABASE_URL": database, "FLEET_LOG_LEVEL": "WARNING"}
    # (its pruning runs once at start, before the warm-up event is delivered: not timed)
    command = [sys.executable, "-m", "fleet", "deliver", "--idle", "0.02"]
    command += ["--batch", str(args.batch), "--concurrency", str(args.concurrency)]
    processes = []
    with tempfile.TemporaryFile("w+") as output:
        for _ in range(workers):
            processes.append(subprocess.Popen(command, env=env, cwd=REPO, stdout=output, stderr=subprocess.STDOUT))
        try:
            record(1, 10**6)  # warm-up: every worker started and connected
            deadline = time.monotonic() + 60
            while delivered() < 1:
                if time.monotonic() > deadline:
                    output.seek(0)
                    raise SystemExit(f"the workers delivered nothing in 60 s:\n{output.read()[-2000:]}")
                time.sleep(0.05)
            started = time.perf_counter()
            record(args.events, 0)
            deadline = time.monotonic() + 600
            while delivered() < args.events + 1:
                if time.monotonic() > deadline:
                    raise SystemExit("not every event was delivered in 600 s")
                time.sleep(0.02)
            elapsed = time.perf_counter() - started
        finally:
            for p in processes:
                p.send_signal(signal.SIGTERM)
            for p in processes:
                try:
                    p.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait()
    return args.events / elapsed


def main(argv: list[str] | None = None) -> int:
    args = _arguments(argv)
    _configure()
    import django

    django.setup()
    from django.db import connection

    from fleet.core.dbbackend.base import database_url
    from fleet.events.services import subscription_create
    from fleet_rules import webhooks

    figures: dict[str, float] = {}
    with bench_database(), tempfile.TemporaryDirectory() as folder:
        port, secret = _free_port(), webhooks.secret_new()
        receiver = subprocess.Popen(
            [sys.executable, str(REPO / "tests/support/webhook_receiver.py"), "--port", str(port)]
            + ["--secret", secret, "--log", f"{folder}/received.jsonl", "--mode-file", f"{folder}/mode"],
        )
        try:
            url = f"http://127.0.0.1:{port}/hook"
            subscription_create(name="bench", url=url, secret=secret, allow_private=True, actor="bench")
            database = database_url(connection)
            load = os.getloadavg()[0]
            print(f"fleet deliver → a local receiver, {args.events} events a run (load {load:.2f})")
            print(f"{'workers':>8} {'subjects':>9} {'events/s':>9}")
            for subjects in (int(s) for s in args.subjects.split(",")):
                for workers in (int(w) for w in args.workers.split(",")):
                    rate = _measure(args, url, workers, subjects, database)
                    label = "each" if subjects == 0 else str(subjects)
                    print(f"{workers:>8} {label:>9} {rate:>9.0f}")
                    key = f"deliver_events_per_s_{workers}w" + (f"_{subjects}subjects" if subjects else "")
                    figures[key] = round(rate, 1)
        finally:
            receiver.send_signal(signal.SIGTERM)
            receiver.wait(timeout=10)
    if args.results:
        merged = json.loads(args.results.read_text()) if args.results.exists() else {}
        args.results.write_text(json.dumps(merged | figures, indent=2, sort_keys=True) + "\n")
        print(f"figures merged into {args.results}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
