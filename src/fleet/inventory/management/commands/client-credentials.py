"""`fleet client-credentials NAME --user USERNAME --scope SCOPE… [--json]`"""

from __future__ import annotations

import json

from django.contrib.auth import get_user_model
from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError

from fleet.inventory.services import operator_credentials_issue


class Command(BaseCommand):
    help = (
        "Create or rotate an operator's automation client (e.g. for dispatching reruns from a script), "
        "owned by a user, for the scopes given (each one the user's permissions let them use); prints its id and "
        "secret once. The client's requests act with at most its owner's permissions at the time."
    )

    def add_arguments(self, parser):
        parser.add_argument("name", help="A name for the client, unique per owner.")
        parser.add_argument("--user", required=True, help="The active user who owns (answers for) the client.")
        parser.add_argument(
            "--scope",
            action="append",
            required=True,
            metavar="SCOPE",
            help="A scope the client may ask for (repeat, or separate with spaces); the user must be able to use it.",
        )
        parser.add_argument("--json", action="store_true", help='Print {"client_id": ..., "client_secret": ...}.')

    def handle(self, *args, **options):
        owner = get_user_model().objects.filter(username=options["user"], is_active=True).first()
        if owner is None:
            raise CommandError(f"no active user {options['user']!r}")
        scopes = [scope for value in options["scope"] for scope in value.split()]
        try:
            issued = operator_credentials_issue(name=options["name"], owner=owner, scopes=scopes)
        except ValidationError as exc:
            raise CommandError("refused: " + " ".join(exc.message_dict["scope"])) from exc
        if options["json"]:
            self.stdout.write(json.dumps({"client_id": issued.client_id, "client_secret": issued.client_secret}))
            return
        self.stdout.write(f"{'Rotated' if issued.rotated else 'Created'} client {options['name']!r} for {owner}.\n")
        self.stdout.write(f"client_id:     {issued.client_id}\nclient_secret: {issued.client_secret}\n")
        self.stdout.write("The secret is stored hashed and will not be shown again.\n")
