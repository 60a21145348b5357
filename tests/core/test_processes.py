"""The processes the README starts: `fleet serve` (granian) and the embedded database."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import httpx
import pytest

from tests.helpers import REPO, start_server, stop


@pytest.mark.e2e
def test_fleet_serve_serves_schema_and_offline_swagger_ui(db):
    process, base = start_server()
    try:
        schema = httpx.get(f"{base}/api/schema/")
        assert schema.status_code == 200
        assert schema.text.startswith("openapi: 3.0.3")
        as_json = httpx.get(f"{base}/api/schema/?format=json").json()
        assert as_json["openapi"] == "3.0.3"
        assert "/api/v1/devices/" in as_json["paths"]
        docs = httpx.get(f"{base}/api/docs/")
        assert docs.status_code == 200
        assert "swagger-ui" in docs.text
        bundle = next(part.split('"')[0] for part in docs.text.split('src="')[1:] if "swagger-ui-bundle" in part)
        assert bundle.startswith("/static/"), "Swagger UI must come from local static files"
        assert httpx.get(f"{base}{bundle}").status_code == 200
        missing = httpx.get(f"{base}/api/v1/nothing/")
        assert missing.status_code == 404 and missing.json()["code"] == "not_found"
    finally:
        output = stop(process)
    assert "granian worker" in output


@pytest.mark.e2e
@pytest.mark.faults
def test_two_processes_started_at_once_share_one_embedded_server(tmp_path):
    script = (
        "import json, time, django; django.setup()\n"
        "from django.db import connection\n"
        "with connection.cursor() as c:\n"
        "    c.execute(\"select pg_postmaster_start_time()::text, current_setting('data_directory')\")\n"
        "    started, data_dir = c.fetchone()\n"
        "print(json.dumps({'started': started, 'data_dir': data_dir}))\n"
        "time.sleep(1.0)\n"
    )
    env = {k: v for k, v in os.environ.items() if k not in {"DATABASE_URL", "XDG_RUNTIME_DIR"}}
    env.update(
        {"DJANGO_SETTINGS_MODULE": "fleet.settings", "FLEET_DATA_DIR": str(tmp_path / "data"), "SECRET_KEY": "x" * 50}
    )
    processes = [
        subprocess.Popen(
            [sys.executable, "-c", script], env=env, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        for _ in range(2)
    ]
    outputs = [p.communicate(timeout=120) for p in processes]
    for process, (_out, err) in zip(processes, outputs, strict=True):
        assert process.returncode == 0, err
    answers = [json.loads(out.strip().splitlines()[-1]) for out, _ in outputs]
    assert answers[0] == answers[1], "both processes must talk to one server"
    assert answers[0]["data_dir"] == str(tmp_path / "data" / "postgres")
    assert any("Embedded PostgreSQL" in err and str(tmp_path / "data" / "postgres") in err for _, err in outputs)

    pidfile = tmp_path / "data" / "postgres" / "postmaster.pid"
    deadline = time.monotonic() + 15
    while pidfile.exists() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not pidfile.exists(), "the last process to detach must stop the embedded server"


@pytest.mark.e2e
@pytest.mark.faults
def test_a_killed_process_does_not_keep_the_embedded_server_alive(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in {"DATABASE_URL", "XDG_RUNTIME_DIR"}}
    env.update(
        {"DJANGO_SETTINGS_MODULE": "fleet.settings", "FLEET_DATA_DIR": str(tmp_path / "d"), "SECRET_KEY": "x" * 50}
    )
    attach = "import django, time; django.setup()\nfrom django.db import connection\nconnection.ensure_connection()\n"
    victim = subprocess.Popen(
        [sys.executable, "-c", attach + "print('up', flush=True)\ntime.sleep(60)\n"],
        env=env,
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert victim.stdout.readline().strip() == "up"
    victim.kill()
    victim.wait(10)
    pidfile = tmp_path / "d" / "postgres" / "postmaster.pid"
    assert pidfile.exists(), "the server outlives a SIGKILLed process (nobody detached it)"
    later = subprocess.run(
        [sys.executable, "-c", attach], env=env, cwd=REPO, capture_output=True, text=True, timeout=60
    )
    assert later.returncode == 0, later.stderr
    deadline = time.monotonic() + 15
    while pidfile.exists() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not pidfile.exists(), "the last live process must stop the server despite the killed one"


@pytest.mark.e2e
def test_a_server_started_for_tests_keeps_answering_after_its_log_outgrows_a_pipe(db):
    """The server logs a JSON line per request; the test harness must drain it (a pipe left unread
    fills at 64 KiB and blocks every worker: an end-to-end run once hung for 180 s on this)."""
    process, base = start_server()
    try:
        with httpx.Client(base_url=base, timeout=10) as client:
            for _ in range(800):  # a logged 404, ~250 bytes of log each: well past a pipe's 64 KiB
                assert client.get("/api/v1/nothing/").status_code == 404
    finally:
        output = stop(process)
    assert output.count("/api/v1/nothing/") >= 800 and len(output) > 128 * 1024


@pytest.mark.process
def test_a_serve_worker_freezes_what_it_loaded_out_of_the_collectors_walk():
    """`fleet.asgi` (what each granian worker imports) ends by freezing the loaded heap, so full
    collections under load do not re-walk Django and the apps (fleet.core.heap)."""
    script = "import gc, fleet.asgi; print(gc.get_freeze_count())"
    frozen = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True, cwd=REPO)
    assert int(frozen.stdout.strip().splitlines()[-1]) > 50_000


def test_the_database_url_a_child_process_gets_reaches_this_very_database(db):
    """`database_url` (what `fleet serve` started by the tests or the bench is given) names the
    server and database of this connection, the embedded server's socket included: the settings
    name no host for it, and a URL built from them reached the system server instead."""
    import psycopg
    from django.db import connection

    from fleet.core.dbbackend.base import database_url

    probe = "SELECT current_database(), current_setting('data_directory')"
    with connection.cursor() as cursor:
        cursor.execute(probe)
        here = cursor.fetchone()
    with psycopg.connect(database_url(connection)) as other:
        assert other.execute(probe).fetchone() == here
