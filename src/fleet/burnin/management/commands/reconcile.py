"""`fleet reconcile --site S --satellite T [--resource-class C] [--gate G]`"""

from __future__ import annotations

from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from fleet.burnin.reconcile import progress_reconcile_page, reconcile_scope_load
from fleet.inventory.models import Device


class Command(BaseCommand):
    help = "Run whole reconcile sweeps in-process (for operators repairing a projection)."

    def add_arguments(self, parser):
        parser.add_argument("--site", required=True, help="Site slug.")
        parser.add_argument("--satellite", required=True, help="Satellite name.")
        parser.add_argument(
            "--resource-class",
            action="append",
            dest="resource_classes",
            help="Resource class (repeatable); default: every class with devices managed by the satellite.",
        )
        parser.add_argument("--gate", help="Only this gate's requirements.")
        parser.add_argument("--limit", type=int, default=500, help="Targets per page (1-500).")

    def handle(self, *args, **options):
        if not 1 <= options["limit"] <= 500:
            raise CommandError("--limit must be between 1 and 500")
        console = Console(file=self.stdout._out, width=100)
        classes = options["resource_classes"] or sorted(
            set(
                Device.objects.filter(site__slug=options["site"], satellite__name=options["satellite"]).values_list(
                    "resource_class", flat=True
                )
            )
        )
        if not classes:
            raise CommandError(f"no devices managed by {options['site']}/{options['satellite']}")
        table = Table(title=f"reconcile {options['site']}/{options['satellite']}")
        for column in ("resource class", "targets", "written", "unchanged", "deferred", "deleted", "guard"):
            table.add_column(column, justify="left" if column == "resource class" else "right")
        with Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            console=console,
            transient=True,
        ) as progress:
            for resource_class in classes:
                totals = self.sweep(progress, options, resource_class)
                table.add_row(
                    resource_class,
                    *(str(totals[k]) for k in ("targets", "written", "unchanged", "deferred", "deleted")),
                    "TRIPPED" if totals["guard_tripped"] else "ok",
                )
        console.print(table)

    def sweep(self, progress: Progress, options: dict, resource_class: str) -> dict:
        totals = {"targets": 0, "written": 0, "unchanged": 0, "deferred": 0, "deleted": 0, "guard_tripped": False}
        task = progress.add_task(resource_class, total=None)
        cursor = None
        while True:
            try:
                scope = reconcile_scope_load(
                    site_slug=options["site"],
                    satellite_name=options["satellite"],
                    resource_class=resource_class,
                    gate=options["gate"],
                    actor=None,
                )
                page = progress_reconcile_page(scope=scope, limit=options["limit"], cursor=cursor)
            except ValidationError as exc:
                if cursor and "cursor" in getattr(exc, "message_dict", {}):
                    cursor = None  # the policy changed mid-sweep: start over
                    totals |= {"written": 0, "unchanged": 0, "deferred": 0}
                    continue
                messages = "; ".join(f"{k}: {' '.join(v)}" for k, v in exc.message_dict.items())
                raise CommandError(messages) from exc
            totals["targets"] = page.target_count
            for key in ("written", "unchanged", "deferred", "deleted"):
                totals[key] += getattr(page, key)
            totals["guard_tripped"] |= page.guard_tripped
            progress.update(
                task, total=page.target_count, completed=totals["written"] + totals["unchanged"] + totals["deferred"]
            )
            cursor = page.next_cursor
            if cursor is None:
                return totals
