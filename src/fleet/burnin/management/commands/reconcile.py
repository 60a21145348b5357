"""`fleet reconcile --site S --satellite T [--resource-class C] [--gate G]`"""

from __future__ import annotations

from typing import Any

from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError, CommandParser
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from fleet.burnin.reconcile.service import SweepTotals, reconcile_sweep
from fleet.burnin.selectors import satellite_resource_classes
from fleet.core.console import command_console
from fleet.inventory.selectors import satellite_of_site


class Command(BaseCommand):
    help = "Run whole reconcile sweeps in-process (for operators repairing a projection)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--site", required=True, help="Site slug.")
        parser.add_argument("--satellite", required=True, help="Satellite name.")
        parser.add_argument(
            "--resource-class",
            action="append",
            dest="resource_classes",
            help="Resource class (repeatable); default: every class the satellite has something to reconcile in "
            "(its devices, its topologies' devices, and projection rows it still holds).",
        )
        parser.add_argument("--gate", help="Only this gate's requirements.")
        parser.add_argument("--limit", type=int, default=500, help="Targets per page (1-500).")

    def handle(self, *args: Any, **options: Any) -> None:
        if not 1 <= options["limit"] <= 500:
            raise CommandError("--limit must be between 1 and 500")
        try:
            satellite = satellite_of_site(site_slug=options["site"], satellite_name=options["satellite"])
        except ValidationError as exc:
            raise CommandError(_messages(exc)) from exc
        classes = options["resource_classes"] or satellite_resource_classes(satellite)
        if not classes:
            raise CommandError(f"nothing to reconcile for {options['site']}/{options['satellite']}")
        console = command_console(self, width=100)
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
                task = progress.add_task(resource_class, total=None)

                def show(totals: SweepTotals, task: Any = task) -> None:
                    progress.update(task, total=totals.target_count, completed=totals.seen)

                try:
                    totals = reconcile_sweep(
                        site_slug=options["site"],
                        satellite_name=options["satellite"],
                        resource_class=resource_class,
                        gate=options["gate"],
                        limit=options["limit"],
                        on_page=show,
                    )
                except ValidationError as exc:
                    raise CommandError(_messages(exc)) from exc
                table.add_row(
                    resource_class,
                    *(str(v) for v in (totals.target_count, totals.written, totals.unchanged, totals.deferred)),
                    str(totals.deleted),
                    "TRIPPED" if totals.guard_tripped else "ok",
                )
        console.print(table)


def _messages(exc: ValidationError) -> str:
    return "; ".join(f"{k}: {' '.join(v)}" for k, v in exc.message_dict.items())
