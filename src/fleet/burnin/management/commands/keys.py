"""`fleet keys init` and `fleet keys publish`: the certificate signing key (docs/security.md)."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from fleet.burnin.certificates.signing import SigningKeyUnavailable, key_path, signing_key_init, signing_key_publish


class Command(BaseCommand):
    help = (
        "Mint and publish the certificate signing key (init), or publish a key put in place (publish). "
        "Nothing else ever creates or publishes a key."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        actions = parser.add_subparsers(dest="action", required=True)
        actions.add_parser("init", help="Mint a key at FLEET_CERTIFICATE_KEY_FILE when there is none, and publish it.")
        actions.add_parser("publish", help="Publish the key at FLEET_CERTIFICATE_KEY_FILE (e.g. after a rotation).")

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            if options["action"] == "init":
                key, minted = signing_key_init()
                said = "minted and published" if minted else "already there; published"
            else:
                key, said = signing_key_publish(), "published"
        except (SigningKeyUnavailable, OSError) as exc:
            raise CommandError(str(exc)) from exc
        self.stdout.write(f"signing key {key.key_id} at {key_path()}: {said}")
