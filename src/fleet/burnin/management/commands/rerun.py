"""`fleet rerun --site S (--device ID… | --topology LABEL | --all-failed) [--mode all] [--dry-run]`"""

from __future__ import annotations

import uuid
from typing import Any

from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db.models import Q
from rich.console import Console
from rich.table import Table

from fleet.burnin.reads.failures import FailureFilters, iter_site_failures
from fleet.burnin.reruns.selection import RerunSelection, selection_devices
from fleet.burnin.reruns.service import DispatchOutcome, rerun_dispatch, rerun_plan_preview
from fleet.core.console import command_console
from fleet.inventory.models import Device, Site, TopologyMembership
from fleet_rules.explanations import EXCLUSION_EXPLANATIONS, SKIP_EXPLANATIONS
from fleet_rules.vocabulary import PlanningMode


class Command(BaseCommand):
    help = "Plan (--dry-run) or dispatch policy-aware burn-in reruns for a selection of devices."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--site", required=True, help="Site slug.")
        selection = parser.add_mutually_exclusive_group(required=True)
        selection.add_argument("--device", nargs="+", dest="devices", help="Device hostnames or ids.")
        selection.add_argument("--topology", help="Every device of the topology (or topologies) with this label.")
        selection.add_argument(
            "--all-failed", action="store_true", help="Every device with a failed or errored requirement."
        )
        parser.add_argument("--mode", choices=PlanningMode.values, default=PlanningMode.NON_PASSING)
        parser.add_argument("--dry-run", action="store_true", help="Show the plan; create nothing.")

    def handle(self, *args: Any, **options: Any) -> None:
        site = Site.objects.filter(slug=options["site"]).first()
        if site is None:
            raise CommandError(f"no site {options['site']!r}")
        device_ids = self.select(site, options)
        if not device_ids:
            raise CommandError("the selection is empty")
        try:
            mode = PlanningMode(options["mode"])
            if options["dry_run"]:
                outcome = rerun_plan_preview(site=site, device_ids=device_ids, mode=mode)
            else:
                outcome = rerun_dispatch(site=site, device_ids=device_ids, mode=mode, requested_by="cli:fleet rerun")
        except ValidationError as exc:
            raise CommandError("; ".join(f"{k}: {' '.join(v)}" for k, v in exc.message_dict.items())) from exc
        self.render(site, outcome, options["dry_run"], device_ids)

    def select(self, site: Site, options: dict[str, Any]) -> list[uuid.UUID]:
        if options["devices"]:
            wanted = options["devices"]
            ids: list[uuid.UUID] = []
            missing: list[str] = []
            for token in wanted:
                query = Q(hostname=token)
                if _looks_like_uuid(token):
                    query |= Q(id=token)
                found = Device.objects.filter(query, site=site).values_list("id", flat=True).first()
                if found is None:
                    missing.append(token)
                else:
                    ids.append(found)
            if missing:
                raise CommandError(f"not devices of {site.slug}: {', '.join(missing)}")
            return selection_devices(site, RerunSelection(devices=tuple(ids)))
        selection = RerunSelection(all_failed=options["all_failed"], topology=options["topology"])
        members = selection_devices(site, selection)
        if selection.topology and not members:
            raise CommandError(f"no topology labelled {selection.topology!r} with devices at {site.slug}")
        return members

    def say_what_failed(self, console: Console, site: Site, selected: list[uuid.UUID]) -> None:
        """When nothing can be planned, the operator still wants to know what is wrong."""
        topologies = set(
            TopologyMembership.objects.filter(device_id__in=selected).values_list("topology_id", flat=True)
        )
        chosen = set(selected)
        failing = [
            f
            for f in iter_site_failures(site, FailureFilters(), order="target")
            if f.device_id in chosen or f.topology_id in topologies
        ]
        if not failing:
            console.print("Nothing can be dispatched now, and nothing in the selection has failed.")
            return
        console.print("Nothing can be dispatched now. What is failing in the selection:")
        for f in failing:
            why = "; ".join(rule.describe(f.units.get(rule.metric, "")) for rule in f.rules) or f.error or f.verdict
            console.print(f"  {f.target} {f.requirement} ({f.verdict}, attempt {f.attempts}): {why}")

    def render(self, site: Site, outcome: DispatchOutcome, dry_run: bool, selected: list[uuid.UUID]) -> None:
        console = command_console(self, width=120)
        hostnames = dict(Device.objects.filter(site=site).values_list("id", "hostname"))
        if outcome.plan.jobs:
            jobs = Table(title="Jobs that would be created (dry run)" if dry_run else "Jobs created")
            for column in ("job", "workflow", "topology", "devices", "requirements"):
                jobs.add_column(column)
            created = outcome.created_jobs or [None] * len(outcome.plan.jobs)
            for planned, job in zip(outcome.plan.jobs, created, strict=True):
                jobs.add_row(
                    str(job.job_id)[:8] if job else "-",
                    planned.workflow_name,
                    planned.topology.label if planned.topology else "-",
                    _names(hostnames, planned.device_ids),
                    ", ".join(r.name for r in planned.requirements),
                )
            console.print(jobs)
        if outcome.plan.skips:
            skips = Table(title="Not dispatched, and why")
            for column in ("reason", "requirement", "resource class", "topology", "devices"):
                skips.add_column(column)
            for group in outcome.plan.skips:
                skips.add_row(
                    f"{group.reason}: {SKIP_EXPLANATIONS[group.reason]}",
                    group.requirement_name,
                    group.resource_class,
                    group.topology.label if group.topology else "-",
                    _names(hostnames, group.device_ids),
                )
            console.print(skips)
        for exclusion in outcome.plan.exclusions:
            console.print(
                f"excluded {hostnames.get(exclusion.device_id, exclusion.device_id)}: {exclusion.reason} "
                f"({EXCLUSION_EXPLANATIONS[exclusion.reason]})"
            )
        if not outcome.plan.jobs:
            self.say_what_failed(console, site, selected)
        console.print(
            f"{len(outcome.plan.jobs)} job(s) {'planned' if dry_run else 'created'}, "
            f"{sum(len(g.device_ids) for g in outcome.plan.skips)} skip(s), "
            f"{len(outcome.plan.exclusions)} exclusion(s)."
        )


def _names(hostnames: dict[uuid.UUID, str], ids: tuple[uuid.UUID, ...]) -> str:
    names = sorted(hostnames.get(i, str(i)) for i in ids)
    return ", ".join(names) if len(names) <= 6 else f"{', '.join(names[:5])} … (+{len(names) - 5})"


def _looks_like_uuid(token: str) -> bool:
    try:
        uuid.UUID(token)
    except ValueError:
        return False
    return True
