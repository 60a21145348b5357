"""`fleet export [-o FILE] [--site SLUG ...]`"""

from __future__ import annotations

from pathlib import Path

from django.core.management.base import BaseCommand

from fleet.fleetfile.export import fleet_export, to_yaml


class Command(BaseCommand):
    help = "Write the fleet (sites, devices, policies, parameter profiles) as a fleet file."

    def add_arguments(self, parser):
        parser.add_argument("-o", "--output", help="Write to this file instead of standard output.")
        parser.add_argument("--site", action="append", dest="sites", help="Only this site (repeatable).")

    def handle(self, *args, **options):
        text = to_yaml(fleet_export(options["sites"]))
        if options["output"]:
            Path(options["output"]).write_text(text)
        else:
            self.stdout.write(text, ending="")
