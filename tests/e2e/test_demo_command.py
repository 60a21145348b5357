"""`fleet demo`'s own controls, as a person at a terminal meets them: its help, `--reset` (what
`make reset` runs) and a DATABASE_URL naming a database that does not exist yet."""

from __future__ import annotations

import subprocess
import sys
import uuid
from urllib.parse import urlsplit, urlunsplit

import psycopg
import pytest
from psycopg import sql

from tests import helpers
from tests.helpers import REPO, fleet_env, free_port


def _url_for(database: str) -> str:
    """The test server's URL with another database name."""
    parts = urlsplit(helpers.test_database_url())  # imported by name, pytest would collect it as a test
    return urlunsplit(parts._replace(path=f"/{database}"))


def _server() -> psycopg.Connection:
    return psycopg.connect(_url_for("postgres"), autocommit=True)


def _exists(database: str) -> bool:
    with _server() as conn:
        return conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [database]).fetchone() is not None


def _drop(database: str) -> None:
    with _server() as conn:
        conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(database)))


#: Where a test that must not reach any database points the demo: a port nothing listens on. Without a
#: database fixture, `test_database_url()` names the developer's database, which a demo that failed to
#: refuse its arguments would migrate and fill.
NOWHERE = "postgres://postgres@127.0.0.1:9/fleet_nowhere"


def _demo(*args: str, timeout: float = 120, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "fleet", "demo", *args],
        env=fleet_env(**env),
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


@pytest.mark.process
def test_the_help_documents_every_knob_a_person_turns():
    result = _demo("--help", DATABASE_URL=NOWHERE)

    assert result.returncode == 0, result.stderr
    usage = " ".join(result.stdout.split())  # argparse wraps; compare with the words joined
    assert "--seed SEED Seed of the simulated executor" in usage and "(default 42;" in usage
    assert "--faulty-share FAULTY_SHARE Share of the simulated devices" in usage and "(default 0.15)" in usage
    assert "--host HOST Address the dashboard and the API listen on (default 127.0.0.1" in usage
    assert "--port PORT Port of the dashboard and the API (default 8000)" in usage
    assert "--reset Delete the demo's data" in usage


@pytest.mark.process
def test_a_share_outside_0_to_1_is_refused_in_one_line():
    result = _demo("--faulty-share", "1.5", DATABASE_URL=NOWHERE)

    assert result.returncode != 0
    assert "--faulty-share: 1.5 is not a share between 0 and 1" in result.stderr
    assert "Traceback" not in result.stderr


@pytest.mark.process
def test_reset_drops_the_demo_database_and_its_files_and_keeps_the_rest(tmp_path):
    database = f"fleet_demo_reset_{uuid.uuid4().hex[:10]}"
    with _server() as conn:
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(database)))
    with psycopg.connect(_url_for(database), autocommit=True) as conn:
        conn.execute("CREATE TABLE leftover (n int)")
    (tmp_path / "demo-admin-password").write_text("old")
    (tmp_path / "agents" / "lon-1" / "sat-a").mkdir(parents=True)
    (tmp_path / "agents" / "lon-1" / "sat-a" / "state.json").write_text("{}")
    (tmp_path / "secret_key").write_text("kept")
    try:
        result = _demo("--reset", DATABASE_URL=_url_for(database), FLEET_DATA_DIR=str(tmp_path))

        assert result.returncode == 0, result.stderr
        assert not _exists(database)
        assert not (tmp_path / "demo-admin-password").exists()
        assert not (tmp_path / "agents").exists()
        assert (tmp_path / "secret_key").read_text() == "kept"  # not the demo's: the service's
        assert f"dropped database {database}" in result.stdout
        assert "Traceback" not in result.stderr
        # Run again: nothing left to reset is not an error.
        again = _demo("--reset", DATABASE_URL=_url_for(database), FLEET_DATA_DIR=str(tmp_path))
        assert again.returncode == 0, again.stderr
        assert "nothing to reset" in again.stdout
    finally:
        _drop(database)


@pytest.mark.process
def test_make_reset_runs_the_demo_reset_and_keeps_the_virtual_environment():
    result = subprocess.run(["make", "-n", "reset"], cwd=REPO, capture_output=True, text=True, timeout=60)

    assert result.returncode == 0, result.stderr
    assert "fleet demo --reset" in result.stdout
    assert ".venv" not in result.stdout.replace(".venv/bin/", "")


@pytest.mark.e2e
def test_a_database_url_naming_a_missing_database_creates_it_instead_of_a_traceback(tmp_path):
    database = f"fleet_demo_missing_{uuid.uuid4().hex[:10]}"
    assert not _exists(database)
    try:
        result = _demo(
            "--port",
            str(free_port()),
            "--duration",
            "1",
            "--time-scale",
            "0",
            timeout=240,
            DATABASE_URL=_url_for(database),
            FLEET_DATA_DIR=str(tmp_path),
        )

        assert result.returncode == 0, result.stderr[-3000:]
        assert "Traceback" not in result.stderr
        assert f"created database {database}" in result.stdout
        assert _exists(database)
    finally:
        _drop(database)


@pytest.mark.process
def test_an_unreachable_database_server_is_one_line_not_a_traceback(tmp_path):
    port = free_port()  # nothing listens there
    result = _demo("--reset", DATABASE_URL=f"postgres://postgres@127.0.0.1:{port}/fleet", FLEET_DATA_DIR=str(tmp_path))

    assert result.returncode != 0
    assert "Traceback" not in result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and f"127.0.0.1:{port}" in lines[0], result.stderr
