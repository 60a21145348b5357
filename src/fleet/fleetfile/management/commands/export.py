"""`fleet export [-o FILE] [--site SLUG ...]`"""

from __future__ import annotations

from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from fleet.fleetfile.export import fleet_export, to_yaml


class Command(BaseCommand):
    help = "Write the fleet (sites, devices, policies, parameter profiles) as a fleet file."

    def add_arguments(self, parser):
        parser.add_argument("-o", "--output", help="Write to this file instead of standard output.")
        parser.add_argument("--site", action="append", dest="sites", help="Only this site (repeatable).")

    def handle(self, *args, **options):
        document = fleet_export(options["sites"])
        text = to_yaml(document)
        if not options["output"]:
            self.stdout.write(text, ending="")
            return
        path = Path(options["output"])
        try:
            path.write_text(text)
        except OSError as exc:
            raise CommandError(f"cannot write {path}: {exc.strerror}") from exc
        sites = document.get("sites", [])
        devices = sum(len(site.get("devices", [])) for site in sites)
        self.stdout.write(
            f"Wrote {path}: {len(sites)} site(s), {devices} device(s), {len(document.get('policies', []))} "
            f"policy(ies), {len(document.get('parameter_profiles', []))} parameter profile(s)."
        )
