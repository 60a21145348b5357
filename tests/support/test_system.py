"""Installing a system package while another process holds apt's lock (STACK-NOTES.md, "Installing while
another apt runs"): the suite's install path waits for the lock, says so, and succeeds.

The lock is apt's real one, `/var/lib/apt/lists/lock`, held by another process with `fcntl` exactly as apt
takes it (a POSIX write lock over the whole file), so `apt-get update` run by the install path meets it as
it would meet a concurrent `apt-get`. The package installed is one that is already there (`coreutils`), so the
run stays a few seconds: `apt-get update` (which takes the lists lock) then a no-op `apt-get install`.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator

import pytest

from tests.support import system

pytestmark = [pytest.mark.process, pytest.mark.xdist_group("apt")]

LISTS_LOCK = "/var/lib/apt/lists/lock"
#: How long the other process holds apt's lock: long enough that an install that does not wait fails.
HELD_S = 6.0

#: The holder waits for the lock like any apt would (another process outside the suite may hold it:
#: an operator's apt-get, unattended upgrades; a CI run was failed by one), for at most the
#: installer's own bound, then holds it for its `seconds`.
_HOLDER = """
import fcntl, os, signal, sys, time
signal.alarm(int(float(sys.argv[3])))
fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o640)
fcntl.lockf(fd, fcntl.LOCK_EX)
signal.alarm(0)
print("held", flush=True)
time.sleep(float(sys.argv[2]))
"""


def _needs_apt_as_root() -> None:
    if os.geteuid() != 0 or shutil.which("apt-get") is None or not os.path.isdir(os.path.dirname(LISTS_LOCK)):
        message = "!!! the apt lock test needs root and apt-get (it holds apt's real lock and runs apt-get)"
        if os.environ.get("CI") == "true":
            pytest.fail(message, pytrace=False)
        pytest.skip(message)


@contextlib.contextmanager
def apt_lock_held(seconds: float) -> Iterator[subprocess.Popen[str]]:
    """Another process holding apt's lists lock for `seconds` (it exits by itself; ended on the way out)."""
    holder = subprocess.Popen(
        [sys.executable, "-c", _HOLDER, LISTS_LOCK, str(seconds), str(system.APT_LOCK_WAIT_S)],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None
        assert holder.stdout.readline().strip() == "held", "the holder could not take apt's lock"
        yield holder
    finally:
        holder.kill()
        holder.wait(timeout=10)


def test_an_install_waits_for_apts_lock_held_by_another_process_then_succeeds(capfd):
    # given another process holding apt's lists lock, as a concurrent `apt-get update` does
    _needs_apt_as_root()
    system.forget_apt_update()
    with apt_lock_held(HELD_S) as holder:
        started = time.monotonic()
        # when the suite's install path runs (apt-get update, then install) with a short retry interval
        problem = system.apt_install(["coreutils"], retry_every_s=1.0)
        waited = time.monotonic() - started
    # then it succeeded, after waiting for the lock, and said that it was waiting
    assert problem is None, problem
    assert waited >= HELD_S - 2.0, f"the install returned after {waited:.1f}s while the lock was held {HELD_S}s"
    said = capfd.readouterr().err
    assert "waiting" in said and LISTS_LOCK in said, said
    assert f"process {holder.pid}" in said, said


def test_an_install_gives_up_after_its_bound_and_says_why():
    # given apt's lock held far longer than the install is allowed to wait
    _needs_apt_as_root()
    system.forget_apt_update()
    with apt_lock_held(30.0):
        # when the install may wait 2 s only
        problem = system.apt_install(["coreutils"], retry_every_s=0.5, wait_at_most_s=2.0)
    # then it fails (no endless wait), naming the lock
    assert problem is not None
    assert "Could not get lock" in problem and "gave up after" in problem, problem


def test_workers_take_one_machine_wide_install_lock(tmp_path):
    # given one process holding the suite's machine-wide install lock (as an xdist worker installing does)
    lock_file = tmp_path / "install.lock"
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import fcntl, sys, time; f = open(sys.argv[1], 'a'); fcntl.flock(f, fcntl.LOCK_EX); "
            "print('held', flush=True); time.sleep(3)",
            str(lock_file),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        started = time.monotonic()
        # when this process takes it
        with system.install_lock(lock_file, retry_every_s=0.5):
            waited = time.monotonic() - started
    finally:
        holder.kill()
        holder.wait(timeout=10)
    # then it waited for the other process to let go (a threading lock would not have)
    assert waited >= 1.5, f"took the install lock after {waited:.1f}s while another process held it"
