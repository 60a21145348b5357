"""Operability against real processes: `fleet serve` with two workers whose counters add up, its
probes through a database outage, its JSON log lines with request ids, and the agent's own
metrics endpoint."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from django.db import connection
from prometheus_client.parser import text_string_to_metric_families

import fleet_agent
from tests.e2e.conftest import sat_a_devices
from tests.helpers import REPO, fleet_env, free_port, start_server, stop
from tests.support.tcp_proxy import TcpProxy

pytestmark = pytest.mark.e2e


def samples(text: str) -> dict[tuple[str, frozenset], float]:
    return {
        (s.name, frozenset(s.labels.items())): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def proxied_database_url(port: int) -> str:
    params = connection.get_connection_params()
    user = params.get("user") or "postgres"
    password = params.get("password")
    auth = f"{user}:{password}" if password else user
    return f"postgresql://{auth}@127.0.0.1:{port}/{connection.settings_dict['NAME']}"


def wait_for(predicate, timeout: float = 30.0, step: float = 0.2):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = predicate()
        if found:
            return found
        time.sleep(step)
    raise AssertionError(f"not within {timeout} s")


@pytest.mark.faults
def test_a_database_outage_seen_from_two_workers_probes_metrics_and_logs(transactional_db, tmp_path: Path):
    params = connection.get_connection_params()
    if str(params.get("host", "")).startswith("/"):
        pytest.skip("the database is reached over a Unix socket here (embedded); the outage needs a TCP path")
    metrics_dir = tmp_path / "metrics"
    with TcpProxy((params.get("host") or "127.0.0.1", int(params.get("port") or 5432))) as proxy:
        env = fleet_env(
            DATABASE_URL=proxied_database_url(proxy.port),
            PROMETHEUS_MULTIPROC_DIR=str(metrics_dir),
            FLEET_DB_CONNECT_TIMEOUT="2",
            FLEET_DB_POOL_TIMEOUT="2",
        )
        server, base = start_server(env, workers=2)
        try:
            # every worker's counters add up: N probes on fresh connections, whichever worker answers
            # (counted from what the server had counted once ready: `start_server` waits on /healthz too)
            healthz = {"operation": "healthz", "method": "GET", "status": "200"}
            key = ("fleet_http_requests_total", frozenset(healthz.items()))
            before = samples(httpx.get(f"{base}/metrics").text).get(key, 0)
            for _ in range(40):
                assert httpx.get(f"{base}/healthz").status_code == 200
            assert httpx.get(f"{base}/readyz").status_code == 200
            mine = "probe-a1b2c3"
            echoed = httpx.get(f"{base}/api/v1/sites/", headers={"X-Request-ID": mine})
            assert echoed.status_code == 401 and echoed.headers["X-Request-ID"] == mine
            scraped = samples(httpx.get(f"{base}/metrics").text)
            assert scraped[key] - before == 40
            workers = {p.name for p in metrics_dir.glob("counter_*.db")}
            assert len(workers) >= 2, f"one worker answered everything: {workers}"

            # the database goes away: not ready (503), still healthy, API requests 503 and counted
            proxy.cut()
            not_ready = wait_for(lambda: (r := httpx.get(f"{base}/readyz", timeout=10)).status_code == 503 and r)
            assert not_ready.json()["code"] == "service_unavailable" and not_ready.headers["Retry-After"] == "5"
            assert httpx.get(f"{base}/healthz").status_code == 200
            down = httpx.get(f"{base}/api/v1/sites/", headers={"Authorization": "Bearer x"}, timeout=10)
            assert down.status_code == 503 and down.json()["code"] == "service_unavailable"

            # and comes back: ready again, the outage on record
            proxy.restore()
            wait_for(lambda: httpx.get(f"{base}/readyz", timeout=10).status_code == 200)
            assert httpx.get(f"{base}/healthz").status_code == 200
            after = samples(httpx.get(f"{base}/metrics").text)
            assert after[("fleet_database_unavailable_total", frozenset())] >= 1
            not_ready_label = {"operation": "readyz", "method": "GET", "status": "503"}
            assert after[("fleet_http_requests_total", frozenset(not_ready_label.items()))] >= 1
        finally:
            output = stop(server)
    lines = [json.loads(line) for line in output.splitlines() if line.startswith("{")]
    mine_lines = [line for line in lines if line.get("request_id") == mine]
    assert [(m["logger"], m["status"], m["operation"]) for m in mine_lines] == [
        ("fleet.request", 401, "api_v1_sites_list")
    ]
    assert any(line["logger"] == "fleet.errors" and line.get("request_id") for line in lines)
    assert list(metrics_dir.glob("counter_*.db")), "a directory the operator named is kept"


def test_the_agent_serves_its_own_metrics(stack, tmp_path):
    stack.agent("once")  # the projection exists: a dispatch can plan
    created = stack.dispatch([d.id for d in sat_a_devices()[:2]])["created_jobs"]
    assert len(created) == 2
    port = free_port()
    log = tmp_path / "agent.log"
    with log.open("w") as sink:
        agent = subprocess.Popen(
            [sys.executable, "-m", "fleet_agent", "run"],
            env=stack.agent_env(FLEET_AGENT_METRICS_PORT=str(port)),
            stdout=sink,
            stderr=subprocess.STDOUT,
            cwd=REPO,
        )
    try:

        def done():
            try:
                text = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=2).text
            except httpx.TransportError:
                return None
            found = samples(text)
            jobs = sum(v for (name, _), v in found.items() if name == "fleet_agent_jobs_total")
            sweeps = sum(v for (name, _), v in found.items() if name == "fleet_agent_sweeps_total")
            return found if jobs >= 2 and sweeps >= 1 else None

        found = wait_for(done, timeout=90, step=0.5)
    finally:
        agent.send_signal(signal.SIGTERM)
        agent.wait(timeout=60)
    assert agent.returncode == 0, log.read_text()[-3000:]
    info = {"version": fleet_agent.__version__, "site": "lon-1", "satellite": stack.satellite.name}
    assert found[("fleet_agent_info", frozenset(info.items()))] == 1
    assert time.time() - found[("fleet_agent_last_contact_timestamp_seconds", frozenset())] < 60
    rc = {"resource_class": "gpu.h200.8x"}
    assert found[("fleet_agent_sweep_duration_seconds_count", frozenset(rc.items()))] >= 1
    finished = sum(v for (name, _), v in found.items() if name == "fleet_agent_executions_total")
    assert finished >= 2
