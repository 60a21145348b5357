"""`fleet client-credentials NAME --user USERNAME [--json]`"""

from __future__ import annotations

import json

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from fleet.inventory.services import operator_credentials_issue


class Command(BaseCommand):
    help = (
        "Create or rotate an operator's automation client (e.g. for dispatching reruns from a script), "
        "owned by a user; prints its id and secret once."
    )

    def add_arguments(self, parser):
        parser.add_argument("name", help="A name for the client, unique per owner.")
        parser.add_argument("--user", required=True, help="The active user who owns (answers for) the client.")
        parser.add_argument("--json", action="store_true", help='Print {"client_id": ..., "client_secret": ...}.')

    def handle(self, *args, **options):
        owner = get_user_model().objects.filter(username=options["user"], is_active=True).first()
        if owner is None:
            raise CommandError(f"no active user {options['user']!r}")
        issued = operator_credentials_issue(name=options["name"], owner=owner)
        if options["json"]:
            self.stdout.write(json.dumps({"client_id": issued.client_id, "client_secret": issued.client_secret}))
            return
        self.stdout.write(f"{'Rotated' if issued.rotated else 'Created'} client {options['name']!r} for {owner}.\n")
        self.stdout.write(f"client_id:     {issued.client_id}\nclient_secret: {issued.client_secret}\n")
        self.stdout.write("The secret is stored hashed and will not be shown again.\n")
