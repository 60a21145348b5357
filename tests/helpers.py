"""Helpers for tests that start real processes against the test database."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
from django.db import connection

REPO = Path(__file__).resolve().parents[1]


def test_database_url() -> str:
    """A DATABASE_URL for the database this test run uses (embedded or system server)."""
    params = connection.get_connection_params()
    name = connection.settings_dict["NAME"]
    user = params.get("user") or "postgres"
    host = params.get("host") or "127.0.0.1"
    port = params.get("port") or 5432
    if str(host).startswith("/"):
        return f"postgresql://{user}@/{name}?host={host}&port={port}"
    password = params.get("password")
    auth = f"{user}:{password}" if password else user
    return f"postgresql://{auth}@{host}:{port}/{name}"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def fleet_env(**extra: str) -> dict[str, str]:
    env = dict(os.environ)
    env["DATABASE_URL"] = test_database_url()
    env.setdefault("SECRET_KEY", "test-secret-key-not-for-production-use-0123456789")
    env.update(extra)
    return env


def start_server(env: dict[str, str] | None = None, workers: int = 1) -> tuple[subprocess.Popen, str]:
    """Run `fleet serve` on a free port; returns the process and its base URL once it answers."""
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "fleet", "serve", "--port", str(port), "--workers", str(workers)],
        env=env or fleet_env(),
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"fleet serve exited early:\n{process.stdout.read()}")
        try:
            httpx.get(f"{base}/api/schema/?format=json", timeout=2)
            return process, base
        except httpx.TransportError:
            time.sleep(0.2)
    process.kill()
    raise RuntimeError("fleet serve did not answer within 30 s")


def stop(process: subprocess.Popen) -> str:
    process.terminate()
    try:
        out, _ = process.communicate(timeout=20)
    except subprocess.TimeoutExpired:
        process.kill()
        out, _ = process.communicate()
    return out or ""
