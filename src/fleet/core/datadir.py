"""The data folder (`FLEET_DATA_DIR`): the embedded PostgreSQL, the secret key, the certificate
signing key, the demo's state. Resolved once, absolute, from the environment or — unset — as the
checkout's `.fleet` beside `src/`, found from this module's own location: never from the current
directory, so a command run from elsewhere reads and writes the same files (docs/security.md).

No Django here: the `fleet` command reads it before the settings load."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from django.core.management.utils import get_random_secret_key

#: `<checkout>/.fleet` (this file is `<checkout>/src/fleet/core/datadir.py`).
DEFAULT_DATA_DIR = Path(__file__).resolve().parents[3] / ".fleet"
SECRET_KEY_FILE = "secret_key"


def data_dir(environ: Mapping[str, str] = os.environ) -> Path:
    configured = environ.get("FLEET_DATA_DIR")
    return Path(configured).resolve() if configured else DEFAULT_DATA_DIR


def secret_key_read(folder: Path) -> str | None:
    """The secret key kept in the data folder, or None (reading never writes)."""
    try:
        return (folder / SECRET_KEY_FILE).read_text().strip() or None
    except OSError:
        return None


def secret_key_ensure(folder: Path) -> None:
    """Keep a secret key in the data folder (owner-only) if there is none: what a server needs so its
    workers, and its restarts, share sessions and signed cursors. Called by the commands that serve."""
    if secret_key_read(folder) is not None:
        return
    folder.mkdir(parents=True, exist_ok=True)
    try:
        fd = os.open(folder / SECRET_KEY_FILE, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return
    with os.fdopen(fd, "w") as handle:
        handle.write(get_random_secret_key())
