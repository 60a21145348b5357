"""`fleet certificate verify FILE… [--keys URL-or-FILE]` and `fleet certificate export --site S [--dir D]`."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from fleet.burnin.certificates.reads import envelope, site_certificates
from fleet.burnin.certificates.signing import published_keys
from fleet.burnin.certificates.verify import read_keys, verify_files
from fleet.core.confinement import OutsideDirectory, file_inside
from fleet.inventory.models import Site
from fleet_rules.certificates import canonical


class Command(BaseCommand):
    help = "Verify acceptance certificate files offline, or export a site's valid certificates as files."

    def add_arguments(self, parser: CommandParser) -> None:
        commands = parser.add_subparsers(dest="action", required=True)
        verify = commands.add_parser("verify", help="Check signature, canonical form and chain; exit 0 or 1.")
        verify.add_argument("files", nargs="+", metavar="FILE")
        verify.add_argument(
            "--keys",
            help="The published keys: a URL (…/api/v1/certificates/keys/) or a file holding that JSON. "
            "Default: the keys in this service's database.",
        )
        verify.add_argument(
            "--token",
            default=os.environ.get("FLEET_TOKEN"),
            help="Bearer token (scope fleet:read) for a --keys URL; default: $FLEET_TOKEN.",
        )
        export = commands.add_parser("export", help="Write every valid certificate of a site as a file.")
        export.add_argument("--site", required=True, help="Site slug.")
        export.add_argument("--dir", default=".", help="Directory to write into (created if missing).")

    def handle(self, *args: Any, **options: Any) -> None:
        if options["action"] == "verify":
            self._verify(options["files"], options.get("keys"), options.get("token"))
        else:
            self._export(options["site"], Path(options["dir"]))

    def _keys(self, source: str | None, token: str | None) -> dict[str, bytes]:
        if source is None:
            return published_keys()
        try:
            return read_keys(source, token)
        except (OSError, ValueError) as exc:
            raise CommandError(f"cannot read keys from {source}: {exc}") from exc

    def _verify(self, names: list[str], source: str | None, token: str | None) -> None:
        keys = self._keys(source, token)
        files = []
        for name in names:
            try:
                files.append((name, Path(name).read_bytes()))
            except OSError as exc:
                raise CommandError(f"cannot read {name}: {exc}") from exc
        results = verify_files(files, keys)
        for name, verdict in results:
            self.stdout.write(f"{name}: {'OK' if verdict.ok else 'REFUSED'}: {verdict.reason}")
        if not all(verdict.ok for _, verdict in results):
            sys.exit(1)

    def _export(self, slug: str, directory: Path) -> None:
        site = Site.objects.filter(slug=slug).first()
        if site is None:
            raise CommandError(f"no site {slug!r}")
        directory.mkdir(parents=True, exist_ok=True)
        written, refused = 0, 0
        for certificate in site_certificates(site):
            hostname = certificate.document["device"]["hostname"]
            try:
                # Only a file directly inside the directory asked for, whatever the hostname.
                path = file_inside(directory, f"{hostname}.{certificate.serial}.json")
            except OutsideDirectory as exc:
                self.stderr.write(f"not written: the certificate {certificate.serial} of {hostname!r}: {exc}")
                refused += 1
                continue
            # The file is the envelope's own canonical form: any byte changed is a different file.
            path.write_bytes(canonical(envelope(certificate)))
            written += 1
        self.stdout.write(f"wrote {written} certificate(s) of {slug} to {directory}")
        if refused:
            raise CommandError(
                f"{refused} certificate(s) not written: their device's hostname would put the file outside {directory}"
            )
