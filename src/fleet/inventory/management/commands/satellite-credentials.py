"""`fleet satellite-credentials SITE SATELLITE [--json]`"""

from __future__ import annotations

import json

from django.core.management.base import BaseCommand, CommandError

from fleet.inventory.models import Satellite
from fleet.inventory.services import satellite_credentials_issue


class Command(BaseCommand):
    help = "Create or rotate a satellite's OAuth2 client and print its id and secret (shown once)."

    def add_arguments(self, parser):
        parser.add_argument("site", help="Site slug.")
        parser.add_argument("satellite", help="Satellite name within the site.")
        parser.add_argument("--json", action="store_true", help='Print {"client_id": ..., "client_secret": ...}.')

    def handle(self, *args, **options):
        satellite = (
            Satellite.objects.select_related("site")
            .filter(site__slug=options["site"], name=options["satellite"])
            .first()
        )
        if satellite is None:
            raise CommandError(f"no satellite {options['satellite']!r} at site {options['site']!r}")
        issued = satellite_credentials_issue(satellite=satellite)
        if options["json"]:
            self.stdout.write(json.dumps({"client_id": issued.client_id, "client_secret": issued.client_secret}))
            return
        verb = "Rotated" if issued.rotated else "Created"
        self.stdout.write(
            f"{verb} credentials for {satellite} (earlier tokens revoked).\n"
            if issued.rotated
            else f"{verb} credentials for {satellite}.\n"
        )
        self.stdout.write(f"client_id:     {issued.client_id}\nclient_secret: {issued.client_secret}\n")
        self.stdout.write("The secret is stored hashed and will not be shown again.\n")
