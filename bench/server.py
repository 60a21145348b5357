"""A real `fleet serve` over the benchmark's own database, and real tokens for it.

The fleet-scale and concurrency figures are taken over HTTP against the production server
(granian, ASGI, pooled connections), not Django's test client: that is where memory and
per-request costs live. The server runs the checkout's own `fleet` command on the throwaway
database `bench/run.py` created, with the same environment overrides as the benchmark.
"""

from __future__ import annotations

import base64
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from uuid import uuid4

import httpx
import psutil
from django.db import connection
from oauth2_provider.models import Application

from fleet.core.dbbackend.base import database_url
from fleet.inventory.models import Satellite, SatelliteCredential

REPO = Path(__file__).resolve().parents[1]
SECRET = "bench-client-secret-not-for-production"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class FleetServer:
    """`fleet serve --workers N` on a free port (or `FLEET_BENCH_PORT`'s), stopped (by its pid) on
    exit; `env` adds to its environment."""

    def __init__(self, *, workers: int = 1, env: dict[str, str] | None = None, port: int = 0) -> None:
        self.port = port or int(os.environ.get("FLEET_BENCH_PORT", "0") or 0) or _free_port()
        self.extra_env = env or {}
        self.base = f"http://127.0.0.1:{self.port}"
        self.workers = workers
        self.process: subprocess.Popen[bytes] | None = None

    def __enter__(self) -> FleetServer:
        env = {
            **os.environ,
            "DATABASE_URL": database_url(connection),
            "SECRET_KEY": os.environ.get("SECRET_KEY") or "bench-secret-key-not-for-production-0123456789abcdef",
            "FLEET_LOG_LEVEL": "WARNING",
            "FLEET_REQUEST_LOG_LEVEL": "WARNING",
            "FLEET_THROTTLE_CLIENT": "100000000/min",
            "FLEET_THROTTLE_ANON": "100000000/min",
            "FLEET_THROTTLE_TOKEN_ADDRESS": "100000/min",
            "FLEET_THROTTLE_TOKEN_CLIENT": "100000/min",
            **self.extra_env,
        }
        command = [sys.executable, "-m", "fleet", "serve", "--port", str(self.port), "--workers", str(self.workers)]
        # Output to a file, never an unread pipe: a full pipe blocks every worker.
        self.log = tempfile.TemporaryFile()
        self.process = subprocess.Popen(command, env=env, cwd=REPO, stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 60
        while True:
            try:
                if httpx.get(f"{self.base}/healthz", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline or self.process.poll() is not None:
                self.__exit__(None, None, None)
                self.log.seek(0)
                raise RuntimeError(f"fleet serve did not start: {self.log.read()[-2000:].decode(errors='replace')}")
            time.sleep(0.2)
        return self

    def __exit__(self, *exc: object) -> None:
        if self.process is None:
            return
        self.process.terminate()
        try:
            self.process.wait(30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(10)
        self.process = None

    def worker_pids(self) -> list[int]:
        """The processes that serve requests (granian's workers, children of `fleet serve`)."""
        assert self.process is not None
        parent = psutil.Process(self.process.pid)
        return [parent.pid] + [child.pid for child in parent.children(recursive=True)]

    def rss_mb(self) -> float:
        """Resident memory of the server and its workers, in MiB."""
        total = 0
        for pid in self.worker_pids():
            try:
                total += psutil.Process(pid).memory_info().rss
            except psutil.NoSuchProcess:
                continue
        return total / 2**20

    def token(self, satellite: Satellite, scopes: list[str]) -> str:
        """A satellite-bound client-credentials token, fetched from the server's /o/token/."""
        application = Application.objects.create(
            name=f"bench-{satellite.name}-{uuid4().hex[:8]}",
            client_type=Application.CLIENT_CONFIDENTIAL,
            authorization_grant_type=Application.GRANT_CLIENT_CREDENTIALS,
            client_secret=SECRET,
        )
        SatelliteCredential.objects.update_or_create(satellite=satellite, defaults={"application": application})
        basic = base64.b64encode(f"{application.client_id}:{SECRET}".encode()).decode()
        response = httpx.post(
            f"{self.base}/o/token/",
            data={"grant_type": "client_credentials", "scope": " ".join(scopes)},
            headers={"Authorization": f"Basic {basic}"},
            timeout=30,
        )
        if response.status_code != 200:
            self.log.seek(0)
            raise RuntimeError(
                f"/o/token/ answered {response.status_code}: {response.text[:500]}\n"
                f"server output:\n{self.log.read()[-3000:].decode(errors='replace')}"
            )
        return response.json()["access_token"]
