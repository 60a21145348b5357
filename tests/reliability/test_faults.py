"""Faults injected into the database under a running `fleet serve`, on a PostgreSQL of the test's own
(`tests.support.private_postgres`): a held table lock, and the server stopped and started again.

What must hold (docs/reliability.md, "Faults"): a request behind a held lock answers 503
`service_unavailable` with `Retry-After` within the statement timeout and the next one is served;
while the database is down every kind of request (a token, a bad token, a person's session, a
login) answers 503 — never a 500, never a hang — and once it is back the same server process
serves again without being restarted, with no traceback in its output.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass

import httpx
import psycopg
import pytest

from tests.helpers import REPO, start_server, stop
from tests.support.private_postgres import PrivatePostgres, unavailable

pytestmark = [pytest.mark.faults, pytest.mark.e2e, pytest.mark.xdist_group("faults")]

STATEMENT_TIMEOUT_S = 3
LOCK_TIMEOUT_S = 1
ADMIN_PASSWORD = "fault-tests-Admin-9f3"
#: How long the database stays down, and how soon after its return requests must be served again.
OUTAGE_S = 20
RECOVERY_S = 5


@dataclass
class Database:
    pg: PrivatePostgres
    env: dict[str, str]
    client_id: str
    client_secret: str


def _fleet(env: dict[str, str], *args: str) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "fleet", *args], env=env, cwd=REPO, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


@pytest.fixture(scope="module")
def database(tmp_path_factory) -> Iterator[Database]:
    try:
        pg = PrivatePostgres()
        pg.start()
    except (OSError, RuntimeError, subprocess.SubprocessError) as exc:
        unavailable(f"the private PostgreSQL did not start: {exc}")
    try:
        pg.create_database("fleet_faults")
        env = {k: v for k, v in os.environ.items() if not k.startswith("FLEET_")}
        env.update(
            DATABASE_URL=pg.url("fleet_faults"),
            SECRET_KEY="fault-tests-secret-key-not-for-production-0123456789",
            FLEET_DATA_DIR=str(tmp_path_factory.mktemp("fleet-data")),
            FLEET_DB_STATEMENT_TIMEOUT=str(STATEMENT_TIMEOUT_S),
            FLEET_DB_LOCK_TIMEOUT=str(LOCK_TIMEOUT_S),
            FLEET_DB_CONNECT_TIMEOUT="2",
            FLEET_DB_POOL_TIMEOUT="2",
            FLEET_LOG_FORMAT="json",
        )
        _fleet(env, "migrate", "--no-input")
        _fleet(env, "apply", "-f", str(REPO / "examples" / "fleet.yaml"))
        issued = json.loads(_fleet(env, "satellite-credentials", "lon-1", "sat-a", "--json"))
        _fleet(
            env,
            "shell",
            "-c",
            "from django.contrib.auth import get_user_model; "
            f"get_user_model().objects.create_superuser('admin', 'admin@example.com', '{ADMIN_PASSWORD}')",
        )
        yield Database(pg, env, issued["client_id"], issued["client_secret"])
    finally:
        pg.close()


@dataclass
class Served:
    base: str
    token: str
    session: httpx.Client

    def get(self, path: str, **kwargs) -> httpx.Response:
        headers = {"Authorization": f"Bearer {self.token}", **kwargs.pop("headers", {})}
        return httpx.get(f"{self.base}{path}", headers=headers, timeout=30, **kwargs)


@pytest.fixture
def served(database) -> Iterator[Served]:
    if not database.pg.running():
        database.pg.start()
    server, base = start_server(database.env, workers=2)
    session = httpx.Client(base_url=base, timeout=30)
    try:
        issued = httpx.post(
            f"{base}/o/token/",
            data={"grant_type": "client_credentials", "scope": "fleet:read"},
            auth=(database.client_id, database.client_secret),
            timeout=30,
        )
        assert issued.status_code == 200, issued.text
        login = session.get("/accounts/login/")
        assert login.status_code == 200
        signed_in = session.post(
            "/accounts/login/",
            data={
                "username": "admin",
                "password": ADMIN_PASSWORD,
                "csrfmiddlewaretoken": session.cookies["csrftoken"],
            },
            headers={"Referer": f"{base}/accounts/login/"},
        )
        assert signed_in.status_code == 302, signed_in.text[:500]
        yield Served(base, issued.json()["access_token"], session)
    finally:
        session.close()
        output = stop(server)
    troubled = [line[:3000] for line in output.splitlines() if "Traceback" in line or '"status": 500' in line]
    assert not troubled, "\n".join(troubled)


def assert_unavailable(response: httpx.Response, what: str) -> None:
    assert response.status_code == 503, (what, response.status_code, response.text[:300])
    assert response.json()["code"] == "service_unavailable", what
    assert int(response.headers["Retry-After"]) > 0, what


def test_a_request_behind_a_held_lock_answers_503_within_the_statement_timeout_and_the_next_works(database, served):
    profiles = "/api/v1/parameter-profiles/"
    assert served.get(profiles).status_code == 200
    holder = psycopg.connect(database.pg.url("fleet_faults"), autocommit=False)
    try:
        holder.execute("LOCK TABLE policies_parameterprofile IN ACCESS EXCLUSIVE MODE")
        for _ in range(2):  # whichever worker answers
            started = time.monotonic()
            blocked = served.get(profiles)
            waited = time.monotonic() - started
            assert_unavailable(blocked, "behind the lock")
            assert waited < STATEMENT_TIMEOUT_S, f"answered after {waited:.1f} s"
        assert served.get("/api/v1/sites/").status_code == 200  # what the lock does not cover is served meanwhile
    finally:
        holder.rollback()
        holder.close()
    assert served.get(profiles).status_code == 200


def test_the_database_stopped_and_started_again_is_503_then_served_without_restarting_the_server(database, served):
    for _ in range(4):  # both workers hold pooled connections
        assert served.get("/api/v1/devices/").status_code == 200
    assert served.session.get("/").status_code == 200

    database.pg.stop()
    down_started = time.monotonic()
    assert_unavailable(served.get("/api/v1/devices/"), "a good token")
    assert_unavailable(served.get("/api/v1/devices/", headers={"Authorization": "Bearer nope"}), "a bad token")
    assert_unavailable(served.session.get("/api/v1/sites/"), "a session on the API")
    dashboard = served.session.get("/")
    assert dashboard.status_code == 503, dashboard.text[:300]
    login = served.session.post(
        "/accounts/login/",
        data={"username": "admin", "password": "x", "csrfmiddlewaretoken": served.session.cookies["csrftoken"]},
        headers={"Referer": f"{served.base}/accounts/login/"},
    )
    assert login.status_code == 503, login.text[:300]
    ready = httpx.get(f"{served.base}/readyz", timeout=30)
    assert ready.status_code == 503 and ready.json()["code"] == "service_unavailable"
    assert time.monotonic() - down_started < 30, "requests hung while the database was down"

    while time.monotonic() - down_started < OUTAGE_S:  # long enough for the pool to back off
        assert_unavailable(served.get("/api/v1/devices/"), "during the outage")
        time.sleep(1)

    database.pg.start()
    back = time.monotonic()
    while served.get("/api/v1/devices/").status_code != 200:
        assert time.monotonic() - back < RECOVERY_S, f"not served again within {RECOVERY_S} s of the database's return"
        time.sleep(0.2)
    print(f"\nrecovered {time.monotonic() - back:.1f} s after the database came back", file=sys.stderr)  # noqa: T201
    for _ in range(6):  # every worker and pooled connection again
        assert served.get("/api/v1/devices/").status_code == 200
        assert served.session.get("/").status_code == 200
    assert httpx.get(f"{served.base}/readyz", timeout=30).status_code == 200
