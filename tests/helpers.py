"""Helpers for tests that start real processes against the test database."""

from __future__ import annotations

import os
import random
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
from django.db import connection

from fleet.core.dbbackend.base import database_url

REPO = Path(__file__).resolve().parents[1]
_SERVER_LOGS: dict[int, Path] = {}  # pid of a server started here -> the file its output goes to


def test_database_url() -> str:
    """A DATABASE_URL for the database this test run uses (embedded or system server)."""
    return database_url(connection)


def free_port() -> int:
    """A port nothing listens on: any (the kernel's choice), or one of `FLEET_TEST_PORTS`
    ("first-last", drawn at random) on a machine where each user of it has its own range."""
    wanted = os.environ.get("FLEET_TEST_PORTS", "")
    if not wanted:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            return s.getsockname()[1]
    first, last = (int(p) for p in wanted.split("-"))
    # in random order: the suite's workers draw from the same range at once
    for port in random.sample(range(first, last + 1), last - first + 1):
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise RuntimeError(f"no free port in FLEET_TEST_PORTS={wanted}")


#: The suite's certificate signing key, minted once for every test and every process a test starts
#: (nothing mints one on the side: `fleet keys init`); each test's database publishes it (tests/conftest.py).
SUITE_CERTIFICATE_KEY = Path(tempfile.gettempdir()) / "fleet-burnin-tests" / "certificate_key.pem"


def suite_certificate_key() -> Path:
    from fleet.burnin.certificates.ed25519 import mint_key_file

    mint_key_file(SUITE_CERTIFICATE_KEY)  # once: never replaces the key already there
    return SUITE_CERTIFICATE_KEY


def fleet_env(**extra: str) -> dict[str, str]:
    env = dict(os.environ)
    env["DATABASE_URL"] = test_database_url()
    env.setdefault("SECRET_KEY", "test-secret-key-not-for-production-use-0123456789")
    env.setdefault("FLEET_CERTIFICATE_KEY_FILE", str(suite_certificate_key()))
    env.update(extra)
    return env


def start_server(env: dict[str, str] | None = None, workers: int = 1) -> tuple[subprocess.Popen, str]:
    """Run `fleet serve` on a free port; returns the process and its base URL once it answers.

    Its output goes to a file, never a pipe: the server logs a JSON line per request, and a pipe
    nobody reads fills (64 KiB) and then blocks every worker in its next log write.

    It is ready when `/healthz` answers (the application is loaded; no database, no work). Asking
    for `/api/schema/` instead made every server start generate the schema (about a second alone,
    5 to 6 s on a loaded machine, and again on a retry reaching the other worker) for nothing."""
    port = free_port()
    log = tempfile.NamedTemporaryFile("w+", prefix="fleet-serve-", suffix=".log", delete=False)  # noqa: SIM115
    process = subprocess.Popen(
        [sys.executable, "-m", "fleet", "serve", "--port", str(port), "--workers", str(workers)],
        env=env or fleet_env(),
        cwd=REPO,
        stdout=log,
        stderr=subprocess.STDOUT,
        text=True,
    )
    _SERVER_LOGS[process.pid] = Path(log.name)
    log.close()
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"fleet serve exited early:\n{server_output(process)}")
        try:
            httpx.get(f"{base}/healthz", timeout=2)
            return process, base
        except httpx.TransportError:
            time.sleep(0.2)
    stop(process)
    raise RuntimeError("fleet serve did not answer within 30 s")


def server_output(process: subprocess.Popen) -> str:
    """What a server started by `start_server` has printed so far."""
    path = _SERVER_LOGS.get(process.pid)
    return path.read_text(errors="replace") if path is not None and path.exists() else ""


def stop(process: subprocess.Popen) -> str:
    """Stop a server started by `start_server` and return everything it printed."""
    process.terminate()
    try:
        process.wait(timeout=20)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
    output = server_output(process)
    path = _SERVER_LOGS.pop(process.pid, None)
    if path is not None:
        path.unlink(missing_ok=True)
    return output
