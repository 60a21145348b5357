"""`fleet apply -f FILE.yaml [--dry-run] [--prune] [--force --reason R] [--what-if] [--json]`"""

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
from fleet.fleetfile.whatif import policy_what_if


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
        parser.add_argument(
            "--what-if",
            action="store_true",
            help="Write nothing; replay every current target's deciding evidence against the file's thresholds "
            "and print the targets that would flip and the certificates that would be superseded.",
        )

    def handle(self, *args, **options):
        path = options["file"]
        try:
            text = sys.stdin.read() if path == "-" else Path(path).read_text()
        except OSError as exc:
            raise CommandError(f"cannot read {path}: {exc.strerror}") from exc
        if options["what_if"]:
            self.what_if(path, text, as_json=options["json"])
            return
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

    def what_if(self, path: str, text: str, *, as_json: bool) -> None:
        try:
            document = parse_text(text)
        except FleetFileError as exc:
            for where, message in exc.problems:
                self.stderr.write(f"{path}: {where}: {message}" if where else f"{path}: {message}")
            raise CommandError(f"{len(exc.problems)} problem(s) found.") from exc
        result = policy_what_if(document=document).as_dict()
        if as_json:
            self.stdout.write(json.dumps(result, indent=2))
            return
        render_what_if(result, command_console(self, width=120))


def render_what_if(result: dict, console: Console) -> None:
    """The flips grouped by site, resource class and requirement, then the certificates count."""
    group = None
    for flip in result["flips"]:
        heading = (flip["site"], flip["resource_class"], flip["requirement"])
        if heading != group:
            group = heading
            console.print(f"[bold]{flip['site']} · {flip['resource_class']} · {flip['requirement']}[/bold]")
        rules = "; ".join(r["text"] for r in flip["rules"])
        console.print(f"  {flip['target']}: {flip['from']} → {flip['to']}" + (f" ({rules})" if rules else ""))
    console.print(
        f"{len(result['flips'])} target(s) would flip; "
        f"{result['certificates_superseded']} certificate(s) would be superseded."
    )
    for warning in result["breakers"]:
        console.print(f"[bold red]⚠ circuit breaker:[/bold red] {warning}")
    for change in result["autopilot"]:
        console.print(f"autopilot: {change}")
    console.print("Nothing was written (--what-if).")


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
