"""Finding 3: `fleet serve` keeps serving while hundreds of connections trickle bytes (under
gunicorn gthread, 8 such connections starved every worker thread)."""

from __future__ import annotations

import socket
import time

import httpx
import pytest

from tests.helpers import start_server, stop

pytestmark = pytest.mark.e2e


@pytest.mark.django_db(transaction=True)
def test_a_normal_client_is_served_within_a_second_while_slow_clients_hold_connections():
    server, base = start_server(workers=1)
    port = int(base.rsplit(":", 1)[1])
    slow: list[socket.socket] = []
    try:
        for n in range(250):
            sock = socket.create_connection(("127.0.0.1", port), timeout=5)
            if n < 200:  # headers that never finish
                sock.sendall(b"GET /api/v1/auth/whoami/ HTTP/1.1\r\nHost: x\r\nX-Slow: a")
            else:  # a body that never finishes
                sock.sendall(
                    b"POST /api/v1/jobs/claim/ HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                    b"Content-Length: 1000\r\n\r\n{"
                )
            slow.append(sock)
        for sock in slow:
            sock.sendall(b"a")
        for _ in range(5):
            started = time.monotonic()
            response = httpx.get(f"{base}/api/v1/auth/whoami/", timeout=10)
            assert response.status_code == 401
            assert time.monotonic() - started < 1.0
    finally:
        for sock in slow:
            sock.close()
        output = stop(server)
    assert "Traceback" not in output, output[-3000:]
