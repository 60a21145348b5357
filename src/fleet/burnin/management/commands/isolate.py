"""`fleet isolate --site S --topology LABEL [--requirement R] [--dry-run]`: find the device that
breaks a rack's collective."""

from __future__ import annotations

import time
from typing import Any

from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError, CommandParser
from rich.console import Console

from fleet.burnin.diagnosis import isolation
from fleet.burnin.models import PolicyProgress
from fleet.core.console import command_console
from fleet.core.exceptions import FleetError
from fleet.inventory.models import Site, Topology
from fleet_rules.vocabulary import IsolationStatus, RequirementScope, Verdict

SIGNS = {Verdict.PASSED: "✓", Verdict.FAILED: "✗", Verdict.ERRORED: "!"}


class Command(BaseCommand):
    help = (
        "Plan (--dry-run) or run culprit isolation for a rack whose cohort collective failed: bisection rounds of "
        "diagnostic collectives through the Job path, followed to the verdict."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--site", required=True, help="Site slug.")
        parser.add_argument("--topology", required=True, help="The topology's label (a rack).")
        parser.add_argument(
            "--requirement", help="The multi-node requirement that failed (default: the one whose row failed)."
        )
        parser.add_argument("--dry-run", action="store_true", help="Show the plan; create nothing.")
        parser.add_argument("--poll", type=float, default=2.0, help="Seconds between looks at the round (default 2).")
        parser.add_argument("--timeout", type=float, default=3600.0, help="Give up following after this many seconds.")

    def handle(self, *args: Any, **options: Any) -> None:
        console = command_console(self)
        site = Site.objects.filter(slug=options["site"]).first()
        if site is None:
            raise CommandError(f"no site {options['site']!r}")
        topologies = list(Topology.objects.filter(site=site, label=options["topology"]))
        if len(topologies) != 1:
            what = "no topology" if not topologies else "more than one topology"
            raise CommandError(f"{what} labelled {options['topology']!r} at {site.slug}")
        topology = topologies[0]
        requirement = options["requirement"] or self.failed_requirement(topology)
        try:
            if options["dry_run"]:
                preview = isolation.isolation_preview(site=site, topology_id=topology.id, requirement_name=requirement)
                self.render_preview(console, isolation.preview_data(preview))
                return
            plan = isolation.isolation_dispatch(
                site=site, topology_id=topology.id, requirement_name=requirement, requested_by="cli:fleet isolate"
            )
        except ValidationError as exc:
            raise CommandError("; ".join(f"{k}: {' '.join(v)}" for k, v in exc.message_dict.items())) from exc
        except FleetError as exc:
            raise CommandError(str(exc)) from exc
        self.follow(console, site, plan, poll=options["poll"], timeout=options["timeout"])

    def failed_requirement(self, topology: Topology) -> str:
        names = list(
            PolicyProgress.objects.filter(
                topology=topology,
                requirement__scope=RequirementScope.MULTI_NODE,
                verdict__in=isolation.FAILED_VERDICTS,
            ).values_list("requirement__name", flat=True)
        )
        if len(names) != 1:
            raise CommandError(
                f"{topology.label} has {len(names)} failed multi-node requirements: name one with --requirement"
            )
        (name,) = names
        return name

    def render_preview(self, console: Console, data: dict[str, Any]) -> None:
        cohort = ", ".join(d["hostname"] for d in data["cohort"])
        console.print(f"[bold]{data['topology_label']}[/bold] · {data['requirement']}: cohort of {len(data['cohort'])}")
        console.print(f"  {cohort}")
        console.print(f"at most {data['max_rounds']} rounds (⌈log2 n⌉ + 1); round 1 would run:")
        for subset in data["first_round"]["subsets"]:
            console.print("  collective over " + " ".join(d["hostname"] for d in subset["devices"]))
        console.print("(dry run: nothing created)")

    def follow(self, console: Console, site: Site, plan: Any, *, poll: float, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        shown_round = 0
        data = isolation.plan_data(plan)
        console.print(
            f"[bold]isolating {data['topology_label']}[/bold] · {data['requirement']}: cohort of "
            f"{len(data['cohort'])}, at most {data['max_rounds']} rounds (plan {data['id']})"
        )
        while True:
            rounds = data["rounds"]
            # Print each round when it is dispatched and again when it is decided.
            while shown_round < len(rounds):
                shown_round += 1
                current = rounds[shown_round - 1]
                if shown_round > 1:
                    self.print_outcome(console, rounds[shown_round - 2])
                console.print(f"round {shown_round}/{data['max_rounds']}: {len(current['subsets'])} collective(s) out")
                for subset in current["subsets"]:
                    console.print("  " + " ".join(d["hostname"] for d in subset["devices"]))
            if data["status"] != IsolationStatus.RUNNING:
                self.print_outcome(console, rounds[-1])
                break
            if time.monotonic() > deadline:
                raise CommandError(f"gave up following after {timeout:g} s; the plan is still running ({data['id']})")
            time.sleep(poll)
            try:
                plan = isolation.isolation_advance(site=site, plan_id=plan.id, requested_by="cli:fleet isolate")
            except FleetError as exc:  # e.g. a device held by another job: try again next time
                console.print(f"  waiting: {exc}")
                continue
            data = isolation.plan_data(plan)
        suspects = ", ".join(d["hostname"] for d in data["unresolved"])
        if data["culprits"]:
            names = ", ".join(d["hostname"] for d in data["culprits"])
            console.print(f"[bold]culprit: {names}[/bold] (found in {len(data['rounds'])} rounds)")
        if suspects:
            console.print(f"inconclusive for: {suspects} (the collective fails only with several of them together)")
        if data["status"] == IsolationStatus.INCONCLUSIVE and not suspects:
            console.print("no culprit found: the rounds stopped narrowing")

    def print_outcome(self, console: Console, r: dict[str, Any]) -> None:
        parts = [
            f"{SIGNS.get(s['verdict'], '?')} " + " ".join(d["hostname"] for d in s["devices"]) for s in r["subsets"]
        ]
        console.print(f"round {r['round']} decided: " + " · ".join(parts))
