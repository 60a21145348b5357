"""One migrated database per run for every pytest-xdist worker to copy (docs/reliability.md, "The suite").

Each worker creates its own test database (`test_<name>_gw0`, …) and migrated it from scratch: four
workers, four full migrations side by side on the machine's two cores at the start of every run
(about 20 s of each worker's first test on a loaded machine). Instead the first worker to get here
migrates one template database, named after a digest of the migrations (`test_<name>_tmpl_<digest>`),
and every worker's database is created from it (`CREATE DATABASE … TEMPLATE`, PostgreSQL's file copy).
Django still runs `migrate` on each copy, which then finds every migration applied: a copy is never
less migrated than a database built from scratch, and a template whose migrations changed is never
used (another digest). The workers wait for the template on one `flock`; the template is built under
another name and renamed when complete, so a half-built one is never copied. Templates of other
digests are dropped by the next build (one left by a concurrent run still in use stays).

Not used without pytest-xdist workers: one process gains nothing from a copy.
"""

from __future__ import annotations

import fcntl
import hashlib
import tempfile
from pathlib import Path

from django.db import OperationalError, connections

__all__ = ["migrated_template", "template_name"]

_SRC = Path(__file__).resolve().parents[2] / "src"
_LOCKS = Path(tempfile.gettempdir())


def _digest() -> str:
    migrations = sorted(_SRC.glob("fleet/**/migrations/*.py"))
    digest = hashlib.sha256()
    for path in migrations:
        digest.update(str(path.relative_to(_SRC)).encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()[:12]


def template_name(base: str) -> str:
    """`test_<base>_tmpl_<digest of the migrations>`, within PostgreSQL's 63 bytes."""
    return f"test_{base}"[:44] + f"_tmpl_{_digest()}"


def migrated_template(alias: str = "default") -> str:
    """The name of a migrated template database on `alias`'s server, built now unless it exists."""
    connection = connections[alias]
    name = template_name(connection.settings_dict["NAME"])
    lock = _LOCKS / f"fleet-burnin-tests-{name}.lock"
    with lock.open("a") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        if not _exists(connection, name):
            _build(connection, name)
    return name


def _exists(connection, name: str) -> bool:
    with connection.creation._nodb_cursor() as cursor:
        cursor.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name])
        return cursor.fetchone() is not None


def _build(connection, name: str) -> None:
    building = f"{name}_building"
    settings_dict = connection.settings_dict
    saved_name, saved_test = settings_dict["NAME"], dict(settings_dict["TEST"])
    settings_dict["TEST"] = {**saved_test, "NAME": building, "TEMPLATE": None}
    try:
        # Django's own test database creation (migrate, createcachetable), under the building name.
        connection.creation.create_test_db(verbosity=0, autoclobber=True, serialize=False, keepdb=False)
    finally:
        connection.close()
        getattr(connection, "close_pool", lambda: None)()
        from django.conf import settings

        settings_dict["NAME"], settings_dict["TEST"] = saved_name, saved_test
        settings.DATABASES[connection.alias]["NAME"] = saved_name
    quote = connection.ops.quote_name
    prefix = name.rsplit("_tmpl_", 1)[0] + "_tmpl_"
    with connection.creation._nodb_cursor() as cursor:
        cursor.execute(f"ALTER DATABASE {quote(building)} RENAME TO {quote(name)}")
        cursor.execute(
            "SELECT datname FROM pg_database WHERE starts_with(datname, %s) AND datname <> %s", [prefix, name]
        )
        for (stale,) in cursor.fetchall():
            try:
                cursor.execute(f"DROP DATABASE {quote(stale)}")
            except OperationalError:  # in use by a concurrent run: it stays, nothing is lost
                continue
