"""`fleet evidence-pack export --site S --hostname H [-o FILE]` and
`fleet evidence-pack verify FILE [--keys URL-or-FILE]` (docs/evidence-pack.md)."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from fleet.burnin.certificates.signing import published_keys
from fleet.burnin.certificates.verify import read_keys
from fleet.burnin.evidence.offline import verdict_lines
from fleet.burnin.evidence.pack import device_for_pack, evidence_pack_build
from fleet.core.confinement import OutsideDirectory, file_inside
from fleet.core.exceptions import NotFoundError


class Command(BaseCommand):
    help = "Write a device's signed evidence pack, or verify one offline (exit 0 valid, 1 refused)."

    def add_arguments(self, parser: CommandParser) -> None:
        commands = parser.add_subparsers(dest="action", required=True)
        export = commands.add_parser("export", help="Write a device's evidence pack (a zip).")
        export.add_argument("--site", required=True, help="Site slug.")
        export.add_argument("--hostname", required=True, help="The device's hostname at that site.")
        export.add_argument(
            "-o",
            "--output",
            help="The file to write (its directory must exist). Default: <hostname>-<serial>.evidence.zip, "
            "sanitised, in the current directory.",
        )
        verify = commands.add_parser("verify", help="Check the signature and every file's SHA-256; exit 0 or 1.")
        verify.add_argument("file", metavar="FILE")
        verify.add_argument(
            "--keys",
            help="The published keys: a URL (…/api/v1/certificates/keys/) or a file holding that JSON; then "
            "nothing but the pack and the keys is read (no database, nothing written). Default: the keys in the "
            "database DATABASE_URL names.",
        )
        verify.add_argument(
            "--token",
            default=os.environ.get("FLEET_TOKEN"),
            help="Bearer token (scope fleet:read) for a --keys URL; default: $FLEET_TOKEN.",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        if options["action"] == "export":
            self._export(options["site"], options["hostname"], options.get("output"))
        else:
            self._verify(options["file"], options.get("keys"), options.get("token"))

    def _export(self, site: str, hostname: str, output: str | None) -> None:
        try:
            device = device_for_pack(site_slug=site, hostname=hostname)
        except NotFoundError as exc:
            raise CommandError(str(exc)) from exc
        pack = evidence_pack_build(device_id=device.id, generated_by="command:evidence-pack")
        asked = Path(output) if output else Path.cwd() / pack.file_name
        try:
            # Only a file directly inside the directory asked for (the current one by default).
            path = file_inside(asked.parent, asked.name)
        except OutsideDirectory as exc:
            raise CommandError(f"not written: {exc}") from exc
        if not path.parent.is_dir():
            raise CommandError(f"not written: {path.parent} is not a directory")
        path.write_bytes(pack.content)
        self.stdout.write(f"wrote {path} ({len(pack.content)} bytes, signed with key {pack.key_id})")

    def _verify(self, name: str, source: str | None, token: str | None) -> None:
        try:
            keys = published_keys() if source is None else read_keys(source, token)
        except (OSError, ValueError) as exc:
            raise CommandError(f"cannot read keys from {source}: {exc}") from exc
        ok, lines = verdict_lines(name, keys)
        for line in lines:
            self.stdout.write(line)
        if not ok:
            sys.exit(1)
