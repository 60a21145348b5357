"""`fleet apply -f FILE.yaml [--dry-run] [--prune] [--force --reason R]`"""

from __future__ import annotations

import getpass
import json
import sys
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError
from rich.console import Console
from rich.table import Table

from fleet.core.console import command_console
from fleet.fleetfile.apply import AcceptanceOverride, ApplySummary, fleet_apply
from fleet.fleetfile.document import FleetFileError, parse_text


class Command(BaseCommand):
    help = "Make the database hold what a fleet file declares (idempotent; validates everything first)."

    def add_arguments(self, parser):
        parser.add_argument("-f", "--file", required=True, help="The fleet file (YAML); - for standard input.")
        parser.add_argument("--dry-run", action="store_true", help="Show what would change; write nothing.")
        parser.add_argument(
            "--prune",
            action="store_true",
            help="Remove devices and topologies of the file's sites that the file does not declare "
            "(those with burn-in history are decommissioned/emptied instead of deleted).",
        )
        parser.add_argument("--json", action="store_true", help="Print the summary as JSON.")
        parser.add_argument(
            "--force",
            action="store_true",
            help="Move devices the file declares accepted even without a valid acceptance certificate "
            "(needs --reason; recorded per device with who and why).",
        )
        parser.add_argument("--reason", default="", help="Why --force (recorded).")

    def handle(self, *args, **options):
        path = options["file"]
        try:
            text = sys.stdin.read() if path == "-" else Path(path).read_text()
        except OSError as exc:
            raise CommandError(f"cannot read {path}: {exc.strerror}") from exc
        force = None
        if options["force"]:
            if not options["reason"].strip():
                raise CommandError("--force needs --reason (it is recorded with who forced it)")
            force = AcceptanceOverride(actor=f"fleet-apply:{getpass.getuser()}", reason=options["reason"].strip())
        try:
            summary = fleet_apply(
                document=parse_text(text), prune=options["prune"], dry_run=options["dry_run"], force_accept=force
            )
        except FleetFileError as exc:
            for where, message in exc.problems:
                self.stderr.write(f"{path}: {where}: {message}" if where else f"{path}: {message}")
            raise CommandError(f"{len(exc.problems)} problem(s) found; nothing was written.") from exc
        if options["json"]:
            self.stdout.write(json.dumps(summary.as_dict(), indent=2))
        else:
            render_summary(summary, command_console(self, width=100))


def render_summary(summary: ApplySummary, console: Console) -> None:
    title = "fleet apply (dry run: nothing written)" if summary.dry_run else "fleet apply"
    table = Table(title=title)
    for column in ("kind", "created", "updated", "unchanged", "removed"):
        table.add_column(column, justify="left" if column == "kind" else "right")
    for kind, counts in summary.counts.items():
        table.add_row(kind, str(counts.created), str(counts.updated), str(counts.unchanged), str(counts.removed))
    console.print(table)
    for resource_class, (old, new) in sorted(summary.policy_versions.items()):
        console.print(f"policy {resource_class}: version {old if old is not None else 'new'} → {new}")
    for note in summary.notes:
        console.print(f"note: {note}")
    if not summary.changed:
        console.print("Everything already matches the file.")
