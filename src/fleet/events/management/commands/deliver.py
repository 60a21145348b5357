"""`fleet deliver`: the webhook delivery worker (run one or more; they share the work)."""

from __future__ import annotations

import logging
import signal
import threading
from datetime import timedelta
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from fleet.events.delivery import deliver_forever


class Command(BaseCommand):
    help = "Deliver events to webhook subscriptions (signed, retried); several may run at once."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--batch", type=int, default=100, help="Deliveries leased per pass (1-1000).")
        parser.add_argument("--concurrency", type=int, default=8, help="Requests in flight at once (1-64).")
        parser.add_argument(
            "--lease",
            type=float,
            default=60.0,
            help="Seconds a delivery is this worker's before another may send it.",
        )
        parser.add_argument(
            "--first-backoff",
            type=float,
            default=5.0,
            help="Seconds before a first retry (then doubling).",
        )
        parser.add_argument("--idle", type=float, default=1.0, help="Seconds to wait when nothing is due.")
        parser.add_argument("--once", action="store_true", help="Stop when nothing is due (for cron and tests).")
        parser.add_argument(
            "--prune-every",
            type=float,
            default=600.0,
            help="Seconds between prunings of what is older than FLEET_EVENTS_RETENTION_DAYS (0: never).",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        if not 1 <= options["batch"] <= 1000:
            raise CommandError("--batch must be between 1 and 1000")
        if not 1 <= options["concurrency"] <= 64:
            raise CommandError("--concurrency must be between 1 and 64")
        if options["prune_every"] < 0:
            raise CommandError("--prune-every must be 0 (never) or positive")
        if options["lease"] <= 0:
            raise CommandError("--lease must be positive")
        # One line per request is the delivery log's job (the database), not the console's.
        logging.getLogger("httpx").setLevel(logging.WARNING)
        stop = threading.Event()
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, lambda *_: stop.set())
        deliver_forever(
            batch=options["batch"],
            concurrency=options["concurrency"],
            lease_for=timedelta(seconds=options["lease"]),
            first_backoff=timedelta(seconds=options["first_backoff"]),
            idle=options["idle"],
            stop=stop,
            once=options["once"],
            prune_every=options["prune_every"],
        )
