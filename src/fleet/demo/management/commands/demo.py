"""`fleet demo`: the service with a simulated fleet going through burn-in.

Migrates (creating DATABASE_URL's database when it does not exist yet), applies the example fleet,
issues each satellite its OAuth2 client, turns each site's bring-up autopilot on (`fleet.autopilot`:
it dispatches, reruns after a backoff, isolates a collective's culprit, and says why in its log
lines), starts `fleet serve` (which runs the autopilot's loop), the webhook worker `fleet deliver`
and one `fleet-agent run` (simulated executor) per satellite, prints the dashboard's URL and login
in a box, then plays the technician (`fleet.demo.technician`: repairs) and prints the progress table
whenever it changes, until Ctrl-C. Every log line — the server's, the agents', its own — has one
format (`FLEET_LOG_FORMAT`, text unless set).
`fleet demo --reset` (`make reset`) deletes the demo's data.

The server and the agents run in process groups of their own, so that Ctrl-C (SIGINT to the
terminal's foreground process group) reaches this process alone, which stops them in order: the
agents first, each finishing or handing back its jobs while the server still answers, then the
server; the embedded PostgreSQL stops when the last process attached to it exits.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import logging
import os
import secrets
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import IO, cast

import httpx
import psycopg
from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError
from django.db import connection, connections
from django.db.models import Q
from psycopg import errors as pg_errors
from psycopg import sql
from rich.console import Console, Group
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from fleet.burnin.certificates.signing import key_path, signing_key_init
from fleet.burnin.models import PolicyProgress
from fleet.burnin.reads import failures as reads
from fleet.core import embedded
from fleet.core.console import command_console
from fleet.core.dbbackend.base import APP_DATABASE
from fleet.core.logs import JsonLines, TextLines
from fleet.demo.simulation import agent_environment
from fleet.demo.story import LifecycleStory, Technician
from fleet.demo.technician import RepairRounds
from fleet.fleetfile.apply import fleet_apply
from fleet.fleetfile.document import AutopilotDecl, FleetFileError, parse_text
from fleet.inventory.models import Satellite, Site
from fleet.inventory.services import satellite_credentials_issue
from fleet.jobs.models import Job
from fleet_rules.explanations import DISPLAY_ORDER, VERDICT_SIGNS
from fleet_rules.vocabulary import ACTIVE_JOB_STATUSES, Verdict

EXAMPLE = Path(__file__).resolve().parents[5] / "examples" / "fleet.yaml"

log = logging.getLogger("fleet.demo")


def _share(value: str) -> float:
    share = float(value)
    if not 0 <= share <= 1:
        raise argparse.ArgumentTypeError(f"{value} is not a share between 0 and 1")
    return share


class Command(BaseCommand):
    help = "Run the service with a simulated fleet going through burn-in (the README's main command)."

    def add_arguments(self, parser):
        parser.add_argument(
            "--host",
            default="127.0.0.1",
            help="Address the dashboard and the API listen on (default 127.0.0.1: this machine only; "
            "0.0.0.0 for every interface).",
        )
        parser.add_argument("--port", type=int, default=8000, help="Port of the dashboard and the API (default 8000).")
        parser.add_argument("--fleet-file", default=str(EXAMPLE), help="The fleet to simulate.")
        parser.add_argument(
            "--time-scale",
            type=float,
            default=0.002,
            help="Real seconds per simulated second: a test's simulated duration is multiplied by it "
            "(0.002: a 30-minute DCGM run takes 3.6 s; 0: no waiting).",
        )
        parser.add_argument(
            "--seed",
            type=int,
            default=42,
            help="Seed of the simulated executor: which devices are faulty (by hostname), which member of each "
            "NVLink domain has a fabric fault, and what they measure (default 42; the same seed plays the same "
            "fleet, after `make reset` too).",
        )
        parser.add_argument(
            "--faulty-share",
            type=_share,
            default=0.15,
            help="Share of the simulated devices that are faulty and fail some tests, 0 to 1 (default 0.15).",
        )
        parser.add_argument(
            "--dispatch-every",
            type=float,
            default=15.0,
            help="The sites' autopilot backoff in seconds: how long a failed target waits before it is rerun "
            "(doubling with each attempt; an errored one a quarter of it). Default 15.",
        )
        parser.add_argument("--duration", type=float, default=0.0, help="Stop after this many seconds (0: never).")
        parser.add_argument(
            "--max-attempts",
            type=int,
            default=3,
            help="The policies' repair_after_failures: a target failing this many times sends its device to "
            "needs_repair, where it is not burned in again until a repair is recorded (default 3).",
        )
        parser.add_argument(
            "--repair-after",
            type=float,
            default=20.0,
            help="Seconds a device waits in needs_repair before the demo's technician swaps a part and its "
            "operator records the repair (default 20).",
        )
        parser.add_argument(
            "--reset",
            action="store_true",
            help="Delete the demo's data and exit: its database (DATABASE_URL's, or `fleet` in the embedded "
            "PostgreSQL), the agents' state and the admin password file; .venv and the keys stay.",
        )

    def handle(self, *args, **options):
        self.shown: str | None = None  # the progress as last printed
        console = command_console(self, width=110)
        log_format = self.configure_logs()
        if options["reset"]:
            self.reset(console)
            return
        self.database_ensure(console)
        call_command("migrate", interactive=False, verbosity=0)
        # The demo is one of the two places a signing key is minted (the other: `fleet keys init`).
        key, minted = signing_key_init()
        log.info("certificate signing key %s at %s (%s)", key.key_id, key_path(), "minted" if minted else "kept")
        try:
            document = parse_text(Path(options["fleet_file"]).read_text())
        except (OSError, FleetFileError) as exc:
            raise CommandError(f"{options['fleet_file']}: {exc}") from exc
        for policy in document.policies:
            # --max-attempts is the policies' repair_after_failures. The breaker's share is raised
            # for the demo's small fleet: 20 % of 18 trays is 3 moves an hour, which its simulated
            # 15 % faulty share and a collective's culprits would trip at once.
            policy.lifecycle = replace(
                policy.lifecycle, repair_after_failures=options["max_attempts"], breaker_share=DEMO_BREAKER_SHARE
            )
        for site in document.sites:
            # The product's autopilot drives the bring-up (docs/autopilot.md); the demo's clock is
            # compressed, so its backoff is seconds.
            site.autopilot = AutopilotDecl(
                enabled=True,
                max_under_test=DEMO_MAX_UNDER_TEST,
                backoff=timedelta(seconds=max(1, round(options["dispatch_every"]))),
            )
        summary = fleet_apply(document=document)
        self.story = LifecycleStory()
        self.technician = RepairRounds(Technician(settings.DATA_DIR / "agents"), options["repair_after"])
        log.info("fleet applied from %s (%s devices created)", options["fleet_file"], summary.counts["devices"].created)
        password = self.ensure_admin(console)
        base = f"http://{options['host']}:{options['port']}"
        children: list[subprocess.Popen] = []
        stop = {"now": False}

        def request_stop(signum, _frame):
            if not stop["now"]:
                log.info(
                    "stopping (%s): the agents finish or hand back their jobs, then the server stops",
                    signal.Signals(signum).name,
                )
            stop["now"] = True

        signal.signal(signal.SIGINT, request_stop)
        signal.signal(signal.SIGTERM, request_stop)
        connections.close_all()
        try:
            children.append(
                self.spawn(
                    [sys.executable, "-m", "fleet", "serve", "--host", options["host"], "--port", str(options["port"])],
                    # The story is the agents' lines and the progress table: a line per request
                    # would bury it (4xx and 5xx still show; FLEET_REQUEST_LOG_LEVEL overrides).
                    {
                        "FLEET_REQUEST_LOG_LEVEL": os.environ.get("FLEET_REQUEST_LOG_LEVEL", "WARNING"),
                        "FLEET_LOG_FORMAT": log_format,
                        # The autopilot's loop (a child of the server) wakes on every change; this
                        # is its pass when nothing changed (a backoff ending), on the demo's clock.
                        "FLEET_AUTOPILOT_INTERVAL": os.environ.get("FLEET_AUTOPILOT_INTERVAL", "2"),
                    },
                )
            )
            self.wait_until_up(base, children[0])
            simulated = agent_environment(
                seed=options["seed"], faulty_share=options["faulty_share"], time_scale=options["time_scale"]
            )
            for satellite in Satellite.objects.select_related("site").order_by("site__slug", "name"):
                issued = satellite_credentials_issue(satellite=satellite)
                env = {
                    "FLEET_AGENT_API": base,
                    "FLEET_AGENT_SITE": satellite.site.slug,
                    "FLEET_AGENT_SATELLITE": satellite.name,
                    "FLEET_AGENT_CLIENT_ID": issued.client_id,
                    "FLEET_AGENT_CLIENT_SECRET": issued.client_secret,
                    **simulated,
                    "FLEET_AGENT_STATE_DIR": str(settings.DATA_DIR / "agents" / satellite.site.slug / satellite.name),
                    "FLEET_AGENT_RECONCILE_INTERVAL": "10",
                    "FLEET_AGENT_EVALUATE_INTERVAL": "3",
                    "FLEET_AGENT_LOG_FORMAT": log_format,
                    # The demo tells the story (its table, the lifecycle's steps): an agent's line per
                    # measurement would bury it. Its warnings and errors still show.
                    "FLEET_AGENT_LOG_LEVEL": os.environ.get("FLEET_AGENT_LOG_LEVEL", "WARNING"),
                }
                children.append(self.spawn([sys.executable, "-m", "fleet_agent", "run"], env))
            # The webhook worker: what the fleet says (docs/events.md) reaches whoever subscribed.
            children.append(self.spawn([sys.executable, "-m", "fleet", "deliver"], {"FLEET_LOG_FORMAT": log_format}))
            self.wait_for_agents(started_at=time.time(), timeout=20)
            self.print_login(console, base, password, options["max_attempts"])
            started, next_dispatch = time.monotonic(), time.monotonic() + 5
            while not stop["now"]:
                if options["duration"] and time.monotonic() - started > options["duration"]:
                    break
                if any(child.poll() is not None for child in children):
                    raise CommandError("a demo process exited unexpectedly; see the log above")
                if time.monotonic() >= next_dispatch:
                    self.technician_pass(console)
                    next_dispatch = time.monotonic() + TECHNICIAN_EVERY_S
                time.sleep(0.5)
        finally:
            # Agents first, so their last reports and handed-back jobs still reach the server; then
            # the server. Children exited on their own (a crash) are not waited for.
            self.terminate(children[1:], timeout=AGENTS_STOP_S)
            self.terminate(children[:1], timeout=SERVER_STOP_S)
        self.print_progress(console)
        log.info("stopped: every process of the demo has exited")

    def configure_logs(self) -> str:
        """One format for every line: FLEET_LOG_FORMAT (`text` unless set), for this process's
        handlers, its own lines (to stdout, beside its table) and the processes it starts."""
        chosen = os.environ.get("FLEET_LOG_FORMAT", "").strip().lower()
        log_format = chosen if chosen in ("json", "text") else "text"
        formatter = JsonLines() if log_format == "json" else TextLines()
        for handler in logging.getLogger().handlers:
            handler.setFormatter(formatter)
        own = logging.StreamHandler(cast(IO[str], self.stdout._out))
        own.setFormatter(formatter)
        log.handlers[:] = [own]
        log.setLevel(logging.INFO)
        log.propagate = False
        logging.getLogger("httpx").setLevel(logging.WARNING)  # its line per request of the start-up probe
        return log_format

    def database_ensure(self, console: Console) -> None:
        """The embedded server (and its database) on first use; DATABASE_URL's database created
        when the server is there but the database is not; anything else one line, no traceback."""
        if _embedded():
            embedded.ensure_server(settings.EMBEDDED_POSTGRES_DIR, database=APP_DATABASE)
            return
        name = settings.DATABASES["default"]["NAME"]
        try:
            connection.ensure_connection()
            return
        except Exception as exc:  # Django wraps the driver's error: look at its cause
            if not isinstance(exc.__cause__, pg_errors.OperationalError) or "does not exist" not in str(exc):
                raise CommandError(f"cannot open database {name} ({self.where()}): {_first_line(exc)}") from None
        with self.server() as server:
            server.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
        connection.close()
        console.print(f"created database {name} on {self.where()} (DATABASE_URL named one that did not exist)")

    def where(self) -> str:
        if _embedded():
            return f"the embedded PostgreSQL in {settings.EMBEDDED_POSTGRES_DIR}"
        db = settings.DATABASES["default"]
        return f"{db.get('HOST') or 'localhost'}:{db.get('PORT') or 5432}"

    def server(self) -> psycopg.Connection:
        """A connection to the server's maintenance database, as the service's user."""
        try:
            if _embedded():
                uri = embedded.ensure_server(settings.EMBEDDED_POSTGRES_DIR).uri("postgres")
                return psycopg.connect(uri, autocommit=True)
            db = settings.DATABASES["default"]
            return psycopg.connect(
                dbname="postgres",
                user=db.get("USER") or None,
                password=db.get("PASSWORD") or None,
                host=db.get("HOST") or None,
                port=db.get("PORT") or None,
                connect_timeout=5,
                autocommit=True,
            )
        except psycopg.OperationalError as exc:
            raise CommandError(f"cannot reach the database server {self.where()}: {_first_line(exc)}") from None

    def reset(self, console: Console) -> None:
        """Drop the demo's database and delete its files; the virtual environment, the service's
        secret key and the certificate key stay."""
        name = settings.DATABASES["default"]["NAME"]
        done = []
        with self.server() as server, server.cursor() as cursor:
            if embedded.DATABASE_EXISTS.one(cursor, {"name": name}) is not None:
                try:
                    cursor.execute(sql.SQL("DROP DATABASE {}").format(sql.Identifier(name)))
                except pg_errors.ObjectInUse:
                    raise CommandError(
                        f"database {name} is in use (is the demo still running?); stop it and run this again"
                    ) from None
                done.append(f"dropped database {name} on {self.where()}")
        for path in (settings.DATA_DIR / "agents", settings.DATA_DIR / "demo-admin-password"):
            if path.is_dir():
                shutil.rmtree(path)
            elif path.exists():
                path.unlink()
            else:
                continue
            done.append(f"deleted {path}")
        for line in done or ["nothing to reset: no demo database and no demo files"]:
            console.print(line)

    def wait_for_agents(self, *, started_at: float, timeout: float) -> None:
        """Until every satellite's agent has been heard from (its start-up lines are then above
        the box), at most `timeout` seconds."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            silent = Satellite.objects.filter(
                Q(last_seen_at__isnull=True) | Q(last_seen_at__lt=datetime.fromtimestamp(started_at, UTC))
            )
            if not silent.exists():
                break
            time.sleep(0.5)
        time.sleep(1)
        connections.close_all()

    def print_login(self, console: Console, base: str, password: str, max_attempts: int) -> None:
        """The dashboard's URL and login, once, in a box: the last thing start-up prints."""
        password_file = settings.DATA_DIR / "demo-admin-password"
        lines = [
            Text.assemble("the dashboard: ", (f"{base}/", "bold")),
            Text.assemble("sign in as admin / ", (password, "bold")),
            Text(f"password kept in {password_file} (mode 0600)"),
            Text(f"API docs {base}/api/docs/  ·  admin {base}/admin/"),
            Text(
                f"The site's autopilot (its lines: fleet.autopilot) burns in at most {DEMO_MAX_UNDER_TEST} devices at "
                f"once and reruns what failed after a backoff; {max_attempts} failure(s) of a target send its device "
                "to repair, and the demo's technician repairs it; a rack collective failing while its members pass "
                "their own tests is not rerun but isolated, and its culprit repaired. Its log: the dashboard's "
                "site › Autopilot. The table below is printed when it changes. Ctrl-C stops everything; "
                "`make reset` starts over.",
            ),
        ]
        # Wide enough that no URL, password or path is broken over two lines.
        wide = command_console(self, width=max(console.width, max(len(line.plain) for line in lines[:4]) + 4))
        wide.print()
        wide.print(Panel(Group(*lines), title="fleet-burnin demo", expand=False))
        wide.print()

    def terminate(self, processes: list[subprocess.Popen], *, timeout: float) -> None:
        """SIGTERM to each process's own group (the server's workers are in it), then wait at most
        `timeout` seconds in all; what is left then is killed."""
        for process in processes:
            if process.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(process.pid, signal.SIGTERM)
        deadline = time.monotonic() + timeout
        for process in processes:
            try:
                process.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                log.warning("pid %s did not stop within %.0f s; killed", process.pid, timeout)
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(process.pid, signal.SIGKILL)
                process.wait()

    def spawn(self, command: list[str], extra_env: dict[str, str]) -> subprocess.Popen:
        """A child in a process group of its own (Ctrl-C reaches the demo alone, which stops the
        children in order), and told to stop if the demo dies without stopping it (SIGKILL)."""
        env = dict(os.environ) | extra_env
        return subprocess.Popen(command, env=env, process_group=0, preexec_fn=_stop_with_parent)

    def wait_until_up(self, base: str, server: subprocess.Popen) -> None:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if server.poll() is not None:
                raise CommandError("fleet serve exited; is the port free?")
            try:
                httpx.get(f"{base}/api/schema/?format=json", timeout=2)
                return
            except httpx.TransportError:
                time.sleep(0.3)
        raise CommandError("fleet serve did not answer within 60 s")

    def ensure_admin(self, console: Console) -> str:
        User = get_user_model()
        password_file = settings.DATA_DIR / "demo-admin-password"
        if User.objects.filter(username="admin").exists() and password_file.exists():
            return password_file.read_text().strip()
        password = secrets.token_urlsafe(12)
        user = User.objects.filter(username="admin").first() or User(username="admin", email="admin@example.com")
        user.is_staff = user.is_superuser = True
        user.set_password(password)
        user.save()
        password_file.write_text(password)
        password_file.chmod(0o600)
        return password

    def technician_pass(self, console: Console) -> None:
        """Say what the lifecycle did, let the technician record the repairs due
        (`fleet.demo.technician`), and print the table if it changed. The rest is the autopilot's."""
        self.story.tell()
        self.technician.record_repairs()
        self.print_progress(console)

    def print_progress(self, console: Console) -> None:
        """The targets by verdict, the failing ones and the active jobs — printed only when that
        differs from what was printed last."""
        table = Table(
            title="Burn-in progress: targets (a requirement × a device, or × a rack) by verdict", show_lines=False
        )
        for column in (
            "site",
            "resource class",
            *(f"{VERDICT_SIGNS[v][0]} {VERDICT_SIGNS[v][1]}" for v in DISPLAY_ORDER),
        ):
            table.add_column(column, justify="left" if column in ("site", "resource class") else "right")
        counts: dict[tuple[str, str], dict[str, int]] = {}
        for slug, rc, verdict in PolicyProgress.objects.values_list("site__slug", "resource_class", "verdict"):
            counts.setdefault((slug, rc), dict.fromkeys(Verdict.values, 0))[verdict] += 1
        for (slug, rc), verdicts in sorted(counts.items()):
            table.add_row(slug, rc, *(str(verdicts[v]) for v in DISPLAY_ORDER))
        lines = []
        for site in Site.objects.all():
            failures, more = reads.site_failures(site, reads.FailureFilters(), order="target", limit=FAILURES_SHOWN)
            for failure in failures:
                lines.append(
                    f"  {VERDICT_SIGNS[Verdict(failure.verdict)][0]} {site.slug}/{failure.target} "
                    f"{failure.requirement} ({_attempt(failure.attempts)}): {_why(failure)}"
                )
            if more:
                lines.append(f"  … more at the dashboard's failures page: /sites/{site.slug}/failures/")
        lines.append(f"active jobs: {Job.objects.filter(status__in=ACTIVE_JOB_STATUSES).count()}")
        state = repr(sorted(counts.items())) + "\n".join(lines)
        if state == self.shown:
            return
        self.shown = state
        console.print(table)
        for line in lines:
            console.print(line, markup=False, highlight=False)


#: The demo's blast radius: devices under test at once at a site (an NVL72 domain's 18 trays fit).
DEMO_MAX_UNDER_TEST = 24
#: Seconds between the technician's rounds (and the progress table's refresh).
TECHNICIAN_EVERY_S = 2.0
#: The circuit breaker's share of a class's devices the demo's policies take (docs/lifecycle.md).
DEMO_BREAKER_SHARE = 0.5
#: Failing targets listed under the progress table (the dashboard lists them all).
FAILURES_SHOWN = 8
#: How long the agents get to finish or hand back their jobs, then the server to stop: Ctrl-C
#: ends everything within their sum.
AGENTS_STOP_S = 8.0
SERVER_STOP_S = 5.0


def _stop_with_parent() -> None:
    """In the child before exec (Linux): SIGTERM when the demo's process dies, so that a demo
    killed outright leaves no agent or server behind."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)


PR_SET_PDEATHSIG = 1


def _embedded() -> bool:
    return settings.DATABASES["default"]["ENGINE"] == "fleet.core.dbbackend"


def _first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]


def _attempt(counted: int) -> str:
    """A failure's attempt; none counted when it ran before the device's last repair (or an earlier
    policy version), as a repaired device's failing row does until its re-burn-in reports."""
    return f"attempt {counted}" if counted else "before its last repair"


def _why(failure: reads.FailureRow) -> str:
    why = "; ".join(rule.describe(failure.units.get(rule.metric, "")) for rule in failure.rules)
    why = why or failure.error or "failed"
    return f"{why} — rerun in progress" if failure.rerun_in_progress else why
