"""`fleet serve` starts the autopilot's loop as its child, and the loop ends with its server —
stopped, or killed outright (no loop left holding the database)."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest

from tests.helpers import fleet_env, start_server, stop

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]


def autopilot_children(pid: int) -> list[int]:
    children = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        for child in (task / "children").read_text().split():
            cmdline = Path(f"/proc/{child}/cmdline").read_bytes().split(b"\0")
            if b"autopilot" in cmdline:
                children.append(int(child))
    return children


def gone(pid: int, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().split()[2]
        except FileNotFoundError:
            return True
        if state == "Z":
            return True
        time.sleep(0.1)
    return False


def test_serve_runs_the_loop_and_a_killed_server_takes_it_along(transactional_db):
    server, _base = start_server(fleet_env())
    try:
        (child,) = autopilot_children(server.pid)
        os.kill(server.pid, signal.SIGKILL)
        server.wait()
        assert gone(child, 3), "the autopilot outlived its killed server"
    finally:
        stop(server)


def test_no_autopilot_starts_none(transactional_db):
    server, _base = start_server(fleet_env(FLEET_AUTOPILOT="off"))
    try:
        assert autopilot_children(server.pid) == []
    finally:
        stop(server)
