"""Benchmark `fleet serve` itself: throughput of normal requests, and latency while slow clients
hold connections open.

    python bench/serve.py [--seconds 15] [--concurrency 16] [--slow 300] [--workers N]
                          [--server granian|gunicorn-gthread]

`--server gunicorn-gthread` runs the same checkout's WSGI application under gunicorn's gthread
worker instead, as `fleet serve` did before issue 11 (2 workers x 4 threads, persistent per-thread
database connections): the before/after figures of docs/reliability.md. gunicorn is not a
dependency of the service: `pip install gunicorn` for that comparison.

Runs the checkout's own `fleet` command end to end, so the same script measures any version of
the server: it creates a throwaway database `fleet_serve_bench_<pid>` on the server DATABASE_URL
names (required: the system PostgreSQL, say), migrates it, applies examples/fleet.yaml, issues a
satellite's credentials, starts `fleet serve` on a free port, and then

1. **throughput**: `--concurrency` keep-alive connections send a fixed mix of normal requests for
   `--seconds` (whoami, a page of devices, a page of the policy-progress projection, and a
   reconcile page: the agent's own seed operation), and it reports requests/s and latency;
2. **slow clients**: `--slow` connections trickle header bytes (one byte a second), another
   `--slow` send complete headers and trickle the body, and one normal client sends requests
   one after another on fresh connections: it reports that client's latency.

Prints figures; asserts nothing about speed. The database is dropped at the end.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import contextlib
import json
import os
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

REPO = Path(__file__).resolve().parents[1]
FLEET = [sys.executable, "-m", "fleet"]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _database_urls(base: str, name: str) -> tuple[str, str]:
    parts = urlsplit(base)
    return urlunsplit(parts._replace(path=f"/{name}")), urlunsplit(parts._replace(path="/postgres"))


def _psql(admin_url: str, sql: str) -> None:
    import psycopg

    with psycopg.connect(admin_url, autocommit=True) as conn:
        conn.execute(sql)


def _fleet(env: dict[str, str], *args: str) -> str:
    done = subprocess.run([*FLEET, *args], env=env, cwd=REPO, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"fleet {' '.join(args)} failed:\n{done.stdout}\n{done.stderr}")
    return done.stdout


async def _request(host: str, port: int, raw: bytes, reader=None, writer=None):
    if reader is None:
        reader, writer = await asyncio.open_connection(host, port)
    writer.write(raw)
    await writer.drain()
    head = await reader.readuntil(b"\r\n\r\n")
    status = int(head.split(b" ", 2)[1])
    length = 0
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value.strip())
    await reader.readexactly(length)
    return status, reader, writer


def _requests(host: str, token: str) -> list[bytes]:
    def get(path: str) -> bytes:
        return f"GET {path} HTTP/1.1\r\nHost: {host}\r\nAuthorization: Bearer {token}\r\n\r\n".encode()

    body = json.dumps(
        {"site_slug": "lon-1", "satellite_name": "sat-a", "resource_class": "gpu.h200.8x", "limit": 100}
    ).encode()
    reconcile = (
        f"POST /api/v1/burn-in/policy-progress/reconcile/ HTTP/1.1\r\nHost: {host}\r\n"
        f"Authorization: Bearer {token}\r\nContent-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
    ).encode() + body
    return [
        get("/api/v1/auth/whoami/"),
        get("/api/v1/devices/?limit=50"),
        get("/api/v1/burn-in/policy-progress/?limit=50"),
        reconcile,
    ]


async def _throughput(host: str, port: int, requests: list[bytes], concurrency: int, seconds: float):
    latencies: list[float] = []
    statuses: dict[int, int] = {}
    deadline = time.perf_counter() + seconds

    async def worker(offset: int) -> None:
        reader = writer = None
        i = offset
        while time.perf_counter() < deadline:
            started = time.perf_counter()
            try:
                status, reader, writer = await _request(host, port, requests[i % len(requests)], reader, writer)
            except (ConnectionError, asyncio.IncompleteReadError):
                reader = writer = None
                status = 0
            latencies.append(time.perf_counter() - started)
            statuses[status] = statuses.get(status, 0) + 1
            i += 1
        if writer is not None:
            writer.close()

    started = time.perf_counter()
    await asyncio.gather(*(worker(n) for n in range(concurrency)))
    return len(latencies) / (time.perf_counter() - started), latencies, statuses


async def _slow_clients(host: str, port: int, token: str, request: bytes, slow: int, seconds: float):
    stop = asyncio.Event()
    opened = 0

    async def trickle(head: bytes, rest: bytes) -> None:
        nonlocal opened
        try:
            _, writer = await asyncio.open_connection(host, port)
            opened += 1
            writer.write(head)
            await writer.drain()
            for byte in rest:
                if stop.is_set():
                    break
                writer.write(bytes([byte]))
                await writer.drain()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stop.wait(), 1.0)
            writer.close()
        except (ConnectionError, OSError):
            pass

    header_trickle = [trickle(b"GET /api/v1/auth/whoami/ HTTP/1.1\r\n", b"X-Slow: " + b"a" * 200) for _ in range(slow)]
    body = b'{"site_slug": "' + b"a" * 400
    body_head = (
        f"POST /api/v1/burn-in/policy-progress/reconcile/ HTTP/1.1\r\nHost: {host}\r\n"
        f"Authorization: Bearer {token}\r\nContent-Type: application/json\r\nContent-Length: {len(body) + 2}\r\n\r\n"
    ).encode()
    body_trickle = [trickle(body_head, body) for _ in range(slow)]
    tasks = [asyncio.create_task(t) for t in (*header_trickle, *body_trickle)]
    await asyncio.sleep(2.0)  # let them connect and start trickling
    latencies, statuses = [], {}
    deadline = time.perf_counter() + seconds
    while time.perf_counter() < deadline:
        started = time.perf_counter()
        try:
            status, _, writer = await asyncio.wait_for(_request(host, port, request), 30)
            writer.close()
        except (TimeoutError, ConnectionError, asyncio.IncompleteReadError):
            status = 0
        latencies.append(time.perf_counter() - started)
        statuses[status] = statuses.get(status, 0) + 1
        await asyncio.sleep(0.1)
    stop.set()
    await asyncio.gather(*tasks, return_exceptions=True)
    return opened, latencies, statuses


def _quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def _ms(values: list[float]) -> str:
    return (
        f"p50 {statistics.median(values) * 1000:.0f} ms, p99 {_quantile(values, 0.99) * 1000:.0f} ms, "
        f"max {max(values) * 1000:.0f} ms"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=15.0, help="length of each run (default 15)")
    parser.add_argument("--concurrency", type=int, default=16, help="connections of the throughput run (16)")
    parser.add_argument("--slow", type=int, default=300, help="slow connections of each kind (default 300)")
    parser.add_argument("--workers", type=int, default=None, help="`fleet serve --workers` (its default if unset)")
    parser.add_argument(
        "--server",
        choices=["granian", "gunicorn-gthread"],
        default="granian",
        help="`fleet serve` (granian, default), or gunicorn gthread as before issue 11",
    )
    args = parser.parse_args(argv)
    base = os.environ.get("DATABASE_URL", "").strip()
    if not base:
        parser.error("set DATABASE_URL to a PostgreSQL server (a throwaway database is created there)")
    if args.server == "gunicorn-gthread":
        import importlib.util

        if importlib.util.find_spec("gunicorn") is None:
            parser.error("--server gunicorn-gthread needs gunicorn: pip install gunicorn")
    name = f"fleet_serve_bench_{os.getpid()}"
    url, admin = _database_urls(base, name)
    env = {
        **os.environ,
        "DATABASE_URL": url,
        "SECRET_KEY": "bench-secret-key-not-for-production-0123456789abcdef",
        "FLEET_LOG_LEVEL": "WARNING",
        "FLEET_THROTTLE_CLIENT": "100000000/min",
        "FLEET_THROTTLE_ANON": "100000000/min",
    }
    _psql(admin, f'CREATE DATABASE "{name}"')
    server = None
    try:
        _fleet(env, "migrate", "--verbosity", "0")
        _fleet(env, "apply", "-f", str(REPO / "examples" / "fleet.yaml"))
        credentials = json.loads(_fleet(env, "satellite-credentials", "lon-1", "sat-a", "--json"))
        port = _free_port()
        if args.server == "gunicorn-gthread":
            command = [
                sys.executable,
                "-m",
                "gunicorn",
                "fleet.wsgi:application",
                "--worker-class",
                "gthread",
                "--workers",
                str(args.workers or 2),
                "--threads",
                "4",
                "--timeout",
                "60",
                "--bind",
                f"127.0.0.1:{port}",
            ]
        else:
            command = [*FLEET, "serve", "--port", str(port)]
            if args.workers:
                command += ["--workers", str(args.workers)]
        server = subprocess.Popen(command, env=env, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        import httpx

        deadline = time.monotonic() + 60
        while True:
            try:
                httpx.get(f"http://127.0.0.1:{port}/api/v1/auth/whoami/", timeout=2)
                break
            except httpx.TransportError:
                if time.monotonic() > deadline or server.poll() is not None:
                    raise RuntimeError("fleet serve did not start") from None
                time.sleep(0.2)
        basic = base64.b64encode(f"{credentials['client_id']}:{credentials['client_secret']}".encode()).decode()
        token = httpx.post(
            f"http://127.0.0.1:{port}/o/token/",
            data={"grant_type": "client_credentials", "scope": "fleet:read burn-in-policy-progress:write"},
            headers={"Authorization": f"Basic {basic}"},
            timeout=30,
        ).json()["access_token"]
        requests = _requests(f"127.0.0.1:{port}", token)
        for raw in requests:  # warm every worker's connection and caches
            asyncio.run(_throughput("127.0.0.1", port, [raw], args.concurrency, 1.0))
        rate, latencies, statuses = asyncio.run(
            _throughput("127.0.0.1", port, requests, args.concurrency, args.seconds)
        )
        print(f"server: {' '.join(command[2:])}")
        print(f"throughput: {rate:.0f} requests/s over {args.seconds:.0f} s, {args.concurrency} connections")
        print(f"  latency {_ms(latencies)}; statuses {dict(sorted(statuses.items()))}")
        opened, latencies, statuses = asyncio.run(
            _slow_clients("127.0.0.1", port, token, requests[0], args.slow, args.seconds)
        )
        print(f"slow clients: {opened} connections open ({args.slow} trickling headers, {args.slow} trickling bodies)")
        print(f"  a normal client's latency {_ms(latencies)}; statuses {dict(sorted(statuses.items()))}")
        return 0
    finally:
        if server is not None:
            server.terminate()
            try:
                server.wait(30)
            except subprocess.TimeoutExpired:
                server.kill()
        _psql(admin, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


if __name__ == "__main__":
    sys.exit(main())
