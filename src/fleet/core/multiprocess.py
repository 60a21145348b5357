"""Where `fleet serve`'s worker processes keep their metrics (prometheus-client's multiprocess
mode): `PROMETHEUS_MULTIPROC_DIR`, prepared by the `fleet` command before Django (and so
prometheus-client) is imported, because the library decides at import whether values live in
files.

A fresh directory per start: a new temporary directory (removed when `fleet serve` exits), or
the one the operator named, emptied. Files of workers that died during this start stay, so their
counts stay in the sums (a counter never goes backwards); no gauge lives in these files (the
gauges are read from the database at scrape time), so nothing stale is left to clean per pid.

Imports nothing but the standard library.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

ENV = "PROMETHEUS_MULTIPROC_DIR"
_OWNED = "FLEET_METRICS_DIR_CREATED"


def prepare() -> Path:
    """Set up the directory for this start of `fleet serve` and export it to the workers."""
    given = os.environ.get(ENV)
    if given:
        path = Path(given)
        path.mkdir(parents=True, exist_ok=True)
        for stale in path.glob("*.db"):
            stale.unlink()
        os.environ.pop(_OWNED, None)
    else:
        path = Path(tempfile.mkdtemp(prefix="fleet-metrics-"))
        os.environ[ENV] = str(path)
        os.environ[_OWNED] = str(path)
    return path


def cleanup() -> None:
    """Remove the directory `prepare` created (not one the operator named)."""
    created = os.environ.get(_OWNED)
    if created and created == os.environ.get(ENV):
        shutil.rmtree(created, ignore_errors=True)
