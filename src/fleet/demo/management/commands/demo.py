"""`fleet demo`: the service with a simulated fleet going through burn-in.

Migrates, applies the example fleet, issues each satellite its OAuth2 client, starts `fleet serve`
and one `fleet-agent run` (simulated executor) per satellite, then plays the operator: it
dispatches everything that has not passed yet and prints the progress until Ctrl-C.
"""

from __future__ import annotations

import os
import secrets
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError
from django.db import connections
from rich.console import Console
from rich.table import Table

from fleet.burnin.models import PolicyProgress
from fleet.burnin.reads import failures as reads
from fleet.burnin.reruns.service import rerun_dispatch
from fleet.core import embedded
from fleet.core.console import command_console
from fleet.core.dbbackend.base import APP_DATABASE
from fleet.fleetfile.apply import fleet_apply
from fleet.fleetfile.document import FleetFileError, parse_text
from fleet.inventory.models import Device, Satellite, Site
from fleet.inventory.services import satellite_credentials_issue
from fleet.jobs.models import Job
from fleet_rules.explanations import DISPLAY_ORDER, VERDICT_SIGNS
from fleet_rules.vocabulary import ACTIVE_JOB_STATUSES, PlanningMode, Verdict

EXAMPLE = Path(__file__).resolve().parents[5] / "examples" / "fleet.yaml"


class Command(BaseCommand):
    help = "Run the service with a simulated fleet going through burn-in (the README's main command)."

    def add_arguments(self, parser):
        parser.add_argument("--host", default="127.0.0.1")
        parser.add_argument("--port", type=int, default=8000)
        parser.add_argument("--fleet-file", default=str(EXAMPLE), help="The fleet to simulate.")
        parser.add_argument(
            "--time-scale",
            type=float,
            default=0.002,
            help="Real seconds per simulated second: a test's simulated duration is multiplied by it "
            "(0.002: a 30-minute DCGM run takes 3.6 s; 0: no waiting).",
        )
        parser.add_argument("--seed", type=int, default=42)
        parser.add_argument("--faulty-share", type=float, default=0.15)
        parser.add_argument("--dispatch-every", type=float, default=15.0, help="Seconds between operator reruns.")
        parser.add_argument("--duration", type=float, default=0.0, help="Stop after this many seconds (0: never).")
        parser.add_argument(
            "--max-attempts",
            type=int,
            default=3,
            help="Rerun a failing target at most this many times under one policy version; then the demo "
            "operator reports its device as needing repair and stops dispatching it.",
        )

    def handle(self, *args, **options):
        self.reported_repair: set[tuple[str, str, str]] = set()
        console = command_console(self, width=110)
        if settings.DATABASES["default"]["ENGINE"] == "fleet.core.dbbackend":
            embedded.ensure_server(settings.EMBEDDED_POSTGRES_DIR, database=APP_DATABASE)
        call_command("migrate", interactive=False, verbosity=0)
        try:
            summary = fleet_apply(document=parse_text(Path(options["fleet_file"]).read_text()))
        except (OSError, FleetFileError) as exc:
            raise CommandError(f"{options['fleet_file']}: {exc}") from exc
        console.print(
            f"Fleet applied from {options['fleet_file']} ({summary.counts['devices'].created} devices created)."
        )
        password = self.ensure_admin(console)
        base = f"http://{options['host']}:{options['port']}"
        children: list[subprocess.Popen] = []
        stop = {"now": False}

        def request_stop(signum, _frame):
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
                    {"FLEET_REQUEST_LOG_LEVEL": os.environ.get("FLEET_REQUEST_LOG_LEVEL", "WARNING")},
                )
            )
            self.wait_until_up(base, children[0])
            for satellite in Satellite.objects.select_related("site").order_by("site__slug", "name"):
                issued = satellite_credentials_issue(satellite=satellite)
                env = {
                    "FLEET_AGENT_API": base,
                    "FLEET_AGENT_SITE": satellite.site.slug,
                    "FLEET_AGENT_SATELLITE": satellite.name,
                    "FLEET_AGENT_CLIENT_ID": issued.client_id,
                    "FLEET_AGENT_CLIENT_SECRET": issued.client_secret,
                    "FLEET_AGENT_SEED": str(options["seed"]),
                    "FLEET_AGENT_TIME_SCALE": str(options["time_scale"]),
                    "FLEET_AGENT_FAULTY_SHARE": str(options["faulty_share"]),
                    "FLEET_AGENT_STATE_DIR": str(settings.DATA_DIR / "agents" / satellite.site.slug / satellite.name),
                    "FLEET_AGENT_RECONCILE_INTERVAL": "10",
                    "FLEET_AGENT_EVALUATE_INTERVAL": "3",
                }
                children.append(self.spawn([sys.executable, "-m", "fleet_agent", "run"], env))
            console.print(
                f"\n[bold]fleet-burnin demo[/bold] — the dashboard: [bold]{base}/[/bold]  "
                f"(sign in as [bold]admin[/bold] / [bold]{password}[/bold])\n"
                f"API docs {base}/api/docs/  ·  admin {base}/admin/\n"
                "Agents are burning in the simulated fleet; the operator loop reruns what has not passed, "
                f"at most {options['max_attempts']} times per failing target. Ctrl-C stops everything.\n"
            )
            started, next_dispatch = time.monotonic(), time.monotonic() + 5
            while not stop["now"]:
                if options["duration"] and time.monotonic() - started > options["duration"]:
                    break
                if any(child.poll() is not None for child in children):
                    raise CommandError("a demo process exited unexpectedly; see the log above")
                if time.monotonic() >= next_dispatch:
                    self.operator_pass(console, options["max_attempts"])
                    next_dispatch = time.monotonic() + options["dispatch_every"]
                time.sleep(0.5)
        finally:
            # Agents first, so their last reports still reach the server; then the server.
            self.terminate(children[1:])
            self.terminate(children[:1])
        self.print_progress(console)

    def terminate(self, processes: list[subprocess.Popen]) -> None:
        for process in processes:
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
        for process in processes:
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()

    def spawn(self, command: list[str], extra_env: dict[str, str]) -> subprocess.Popen:
        env = dict(os.environ) | extra_env
        return subprocess.Popen(command, env=env)

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

    def operator_pass(self, console: Console, max_attempts: int) -> None:
        """What an operator does: rerun everything that has not passed, except targets that already
        failed `max_attempts` times under this policy — those devices need repair, not another run."""
        for site in Site.objects.all():
            failures = list(reads.iter_site_failures(site, reads.FailureFilters(), order="target"))
            repair = [f for f in failures if f.attempts >= max_attempts]
            for failure in repair:
                if (site.slug, failure.target, failure.requirement) not in self.reported_repair:
                    self.reported_repair.add((site.slug, failure.target, failure.requirement))
                    console.print(
                        f"[bold red]needs repair[/bold red] {site.slug}/{failure.target}: {failure.requirement} "
                        f"failed {failure.attempts} times — {_why(failure)}"
                    )
            held_back = {f.device_id for f in repair if f.device_id} | set(
                Device.objects.filter(
                    memberships__topology_id__in=[f.topology_id for f in repair if f.topology_id]
                ).values_list("id", flat=True)
            )
            waiting = set(
                PolicyProgress.objects.filter(site=site, device__isnull=False)
                .exclude(verdict=Verdict.PASSED)
                .values_list("device_id", flat=True)
            )
            waiting |= set(
                PolicyProgress.objects.filter(site=site, topology__isnull=False)
                .exclude(verdict=Verdict.PASSED)
                .values_list("topology__devices__id", flat=True)
            ) - {None}
            waiting -= held_back
            if not waiting:
                continue
            outcome = rerun_dispatch(
                site=site,
                device_ids=sorted(waiting, key=str),
                mode=PlanningMode.NON_PASSING,
                requested_by="demo operator",
            )
            if outcome.created_jobs:
                console.print(
                    f"{site.slug}: dispatched {len(outcome.created_jobs)} job(s) for {len(waiting)} device(s)"
                )
        self.print_progress(console)

    def print_progress(self, console: Console) -> None:
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
        console.print(table)
        for site in Site.objects.all():
            failures, more = reads.site_failures(site, reads.FailureFilters(), order="target", limit=FAILURES_SHOWN)
            for failure in failures:
                console.print(
                    f"  {VERDICT_SIGNS[Verdict(failure.verdict)][0]} {site.slug}/{failure.target} "
                    f"{failure.requirement} (attempt {failure.attempts}): {_why(failure)}"
                )
            if more:
                console.print(f"  … more at the dashboard's failures page: /sites/{site.slug}/failures/")
        console.print(f"active jobs: {Job.objects.filter(status__in=ACTIVE_JOB_STATUSES).count()}")


#: Failing targets listed under the progress table (the dashboard lists them all).
FAILURES_SHOWN = 8


def _why(failure: reads.FailureRow) -> str:
    return "; ".join(rule.describe() for rule in failure.rules) or failure.error or "failed"
