"""`fleet autopilot`: run the bring-up autopilot's loop (one leader across processes; `fleet serve`
starts one), or `--once` one pass over every enabled site, printing what it did."""

from __future__ import annotations

import os
import signal

from django.core.management.base import BaseCommand

from fleet.autopilot.loop import leader_name, passes_once, run


class Command(BaseCommand):
    help = "Run the bring-up autopilot: dispatch, rerun, isolate and renew within each site's blast radius."

    def add_arguments(self, parser):
        parser.add_argument(
            "--interval",
            type=float,
            default=float(os.environ.get("FLEET_AUTOPILOT_INTERVAL", "10")),
            help="Seconds between passes when nothing wakes it (default 10, FLEET_AUTOPILOT_INTERVAL).",
        )
        parser.add_argument("--once", action="store_true", help="One pass over every enabled site, then exit.")

    def handle(self, *args, **options):
        if options["once"]:
            passes_once(leader_name())
            return
        stop = {"now": False}

        def request_stop(_signum, _frame):
            stop["now"] = True

        signal.signal(signal.SIGINT, request_stop)
        signal.signal(signal.SIGTERM, request_stop)
        # Started by `fleet serve`: it ends with its server, even one killed without a word.
        parent = int(os.environ.get("FLEET_AUTOPILOT_PARENT", "0") or 0)
        run(interval=options["interval"], should_stop=lambda: stop["now"] or bool(parent and os.getppid() != parent))
