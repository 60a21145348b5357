"""`fleet serve`: the production server, granian in front of Django's ASGI handler.

Why this server (measured with `bench/serve.py`, see docs/operations.md): connections are read by
granian's event loop (Rust), not by Python threads, with a deadline for the request headers; the
body is read by `fleet.core.bounds.BoundedASGIApplication` with a deadline and a size limit; only
a complete request reaches Django, whose synchronous code then runs in a thread of its own with a
pooled database connection. Hundreds of clients trickling bytes hold no worker.

Processes: the `fleet serve` process is the supervisor; it forks `--workers` worker processes
(granian's `fork` start method on Linux), restarts a worker that dies, and on SIGTERM/SIGINT
stops them gracefully (`--graceful-timeout`, then they are killed). The workers' metrics add up
through prometheus-client's multiprocess files (`fleet.core.multiprocess`, prepared by `fleet.cli`).
It also starts the bring-up autopilot's loop (`fleet autopilot`, docs/autopilot.md) as a child
process, unless `--no-autopilot` (FLEET_AUTOPILOT=off): every `fleet serve` runs one, and one leader
among them acts (a PostgreSQL advisory lock), so a second server is a standby, not a second actor.
"""

from __future__ import annotations

import contextlib
import copy
import ctypes
import logging
import os
import signal
import subprocess
import sys
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand
from django.db import connections

from fleet.core import embedded, multiprocess
from fleet.core.dbbackend.base import APP_DATABASE

logger = logging.getLogger("fleet.serve")


def _embedded_in_use() -> bool:
    return settings.DATABASES["default"]["ENGINE"] == "fleet.core.dbbackend"


class Command(BaseCommand):
    help = "Run the API and admin with granian (ASGI), bounded against slow and hostile clients."

    def add_arguments(self, parser):
        parser.add_argument("--host", default=os.environ.get("FLEET_HOST", "127.0.0.1"))
        parser.add_argument("--port", type=int, default=int(os.environ.get("FLEET_PORT", "8000")))
        parser.add_argument(
            "--workers",
            type=int,
            default=int(os.environ.get("FLEET_WORKERS", "2")),
            help="Worker processes (default 2, FLEET_WORKERS).",
        )
        parser.add_argument(
            "--backpressure",
            type=int,
            default=int(os.environ.get("FLEET_BACKPRESSURE", "512")),
            help="Requests a worker holds at once, slow bodies included; more wait (default 512, FLEET_BACKPRESSURE).",
        )
        parser.add_argument("--graceful-timeout", type=int, default=20, help="Seconds a worker gets to stop.")
        parser.add_argument("--access-log", action="store_true", help="Log every request to stdout.")
        parser.add_argument(
            "--no-autopilot",
            action="store_true",
            default=os.environ.get("FLEET_AUTOPILOT", "").strip().lower() in ("off", "0", "false", "no"),
            help="Do not start the bring-up autopilot's loop (FLEET_AUTOPILOT=off).",
        )

    def handle(self, *args, **options):
        from granian import Granian
        from granian.constants import HTTPModes, Interfaces
        from granian.http import HTTP1Settings

        if _embedded_in_use():
            # The supervisor owns the embedded server, so it lives as long as the service does and
            # forked workers inherit the attachment instead of racing to start it.
            embedded.ensure_server(settings.EMBEDDED_POSTGRES_DIR, database=APP_DATABASE)
        connections.close_all()
        bounds = settings.REQUEST_BOUNDS
        server = Granian(
            "fleet.asgi:application",
            address=options["host"],
            port=options["port"],
            interface=Interfaces.ASGINL,  # ASGI without lifespan: Django has none (granian warned at start)
            workers=options["workers"],
            backpressure=options["backpressure"],
            http=HTTPModes.http1,
            websockets=False,
            http1_settings=HTTP1Settings(header_read_timeout=int(bounds["HEADER_READ_TIMEOUT"] * 1000)),
            log_access=options["access_log"],
            log_dictconfig=_granian_logging(),
            respawn_failed_workers=True,
            workers_kill_timeout=options["graceful_timeout"],
        )
        logger.info(
            "Serving fleet-burnin on http://%s:%s/ with %s granian worker(s) (API docs at /api/docs/)",
            options["host"],
            options["port"],
            options["workers"],
        )
        # By command name, not import: the kernel knows no app (the autopilot is one).
        autopilot = (
            None
            if options["no_autopilot"]
            else subprocess.Popen(
                [sys.executable, "-m", "fleet", "autopilot"],
                env=os.environ | {"FLEET_AUTOPILOT_PARENT": str(os.getpid())},
                preexec_fn=_end_with_parent,
            )
        )
        try:
            server.serve()
        finally:
            if autopilot is not None:
                _stop(autopilot, timeout=options["graceful_timeout"])
            multiprocess.cleanup()


def _end_with_parent() -> None:
    """In the autopilot's child before exec (Linux): SIGTERM when this server dies, even killed
    outright, so that no loop outlives its server (nor holds its database open)."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)


PR_SET_PDEATHSIG = 1


def _stop(process: subprocess.Popen[bytes], *, timeout: float) -> None:
    """SIGTERM (it ends its pass and releases the leadership), then SIGKILL after `timeout`."""
    if process.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            process.send_signal(signal.SIGTERM)
    try:
        process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def _granian_logging() -> dict[str, Any]:
    """granian's own lines (start, workers, access log) in the service's log format and on its
    stream (FLEET_LOG_FORMAT, stderr), not granian's `[INFO] …` on stdout: one format in one log."""
    return {
        "formatters": copy.deepcopy(settings.LOGGING["formatters"]),  # dictConfig consumes its "()" keys
        "handlers": {"fleet": {"class": "logging.StreamHandler", "formatter": settings.LOG_FORMAT}},
        "loggers": {
            "_granian": {"handlers": ["fleet"], "level": "INFO", "propagate": False},
            "granian.access": {"handlers": ["fleet"], "level": "INFO", "propagate": False},
        },
    }
