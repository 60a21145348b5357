"""A PostgreSQL server of the test's own (initdb + pg_ctl in a temporary folder, on a free port) that
a fault test may stop, restart and lock as it likes: the shared server (system or embedded) that
every other test uses is never touched.

The binaries come from the PATH or from Debian's `/usr/lib/postgresql/<version>/bin` (the
`postgresql` package; installed when missing and running as root, see `tests.support.system`).
Without them the test fails under `CI=true` and is skipped loudly elsewhere. As root, the server
runs as the `postgres` system user (initdb refuses root).
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path
from typing import NoReturn

import psycopg
import pytest

from tests.helpers import free_port
from tests.support import system

WHY = "the database fault tests (a private PostgreSQL they can stop and restart)"


def _bin_dir() -> Path | None:
    found = shutil.which("initdb")
    if found:
        return Path(found).parent
    versions = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=lambda p: int(Path(p).parts[-3]))
    return Path(versions[-1]).parent if versions else None


def postgres_bin_dir() -> Path:
    found = _bin_dir()
    if found is None:
        problem = system.apt_install(["postgresql"], unless=lambda: _bin_dir() is not None)
        found = _bin_dir()
        if found is None:
            unavailable(
                f"initdb/pg_ctl are missing: {problem or 'not found after installing'}. Install them with "
                "`sudo apt-get install -y --no-install-recommends postgresql` and run the tests again."
            )
    return found


def unavailable(problem: str) -> NoReturn:
    """Fail under `CI=true` (CI must never skip silently), skip loudly elsewhere."""
    message = f"!!! {WHY} cannot run: {problem}"
    warnings.warn(message, stacklevel=2)
    print(message, file=sys.stderr)  # noqa: T201 - meant to be seen even without -ra
    if os.environ.get("CI") == "true":
        pytest.fail(message, pytrace=False)
    pytest.skip(message)


class PrivatePostgres:
    """`start()`, `stop()`, `url(dbname)`; `close()` stops it and removes its folder."""

    def __init__(self) -> None:
        self.bin = postgres_bin_dir()
        self.root = Path(tempfile.mkdtemp(prefix="fleet-private-pg-"))
        self.data = self.root / "data"
        self.log = self.root / "server.log"
        self.port = free_port()
        self._user: str | None = None
        if os.geteuid() == 0:
            self._user = "postgres"
            entry = pwd.getpwnam(self._user)
            os.chown(self.root, entry.pw_uid, entry.pw_gid)
            self.root.chmod(0o700)
        self._run(
            str(self.bin / "initdb"), "-D", str(self.data), "-U", "postgres", "-A", "trust", "--no-sync", "-E", "UTF8"
        )
        with (self.data / "postgresql.conf").open("a") as conf:
            conf.write(
                f"port = {self.port}\nlisten_addresses = '127.0.0.1'\nunix_socket_directories = '{self.root}'\n"
                "fsync = off\nsynchronous_commit = off\nfull_page_writes = off\nmax_connections = 60\n"
            )

    def _run(self, *argv: str, check: bool = True, timeout: float = 120) -> subprocess.CompletedProcess:
        command = list(argv) if self._user is None else ["runuser", "-u", self._user, "--", *argv]
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout, check=False)
        if check and done.returncode != 0:
            raise RuntimeError(f"{' '.join(argv)} exited {done.returncode}: {done.stdout}{done.stderr}")
        return done

    def start(self) -> None:
        self._run(str(self.bin / "pg_ctl"), "-D", str(self.data), "-l", str(self.log), "-w", "-t", "60", "start")

    def stop(self, mode: str = "fast") -> None:
        self._run(str(self.bin / "pg_ctl"), "-D", str(self.data), "-m", mode, "-w", "-t", "60", "stop")

    def running(self) -> bool:
        return self._run(str(self.bin / "pg_ctl"), "-D", str(self.data), "status", check=False).returncode == 0

    def url(self, dbname: str = "postgres") -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/{dbname}"

    def create_database(self, name: str) -> None:
        with psycopg.connect(self.url(), autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')

    def wait_ready(self, timeout: float = 30) -> None:
        deadline = time.monotonic() + timeout
        while True:
            try:
                psycopg.connect(self.url(), connect_timeout=2).close()
                return
            except psycopg.OperationalError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)

    def close(self) -> None:
        if self.running():
            self.stop("immediate")
        shutil.rmtree(self.root, ignore_errors=True)
