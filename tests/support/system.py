"""System tools the tests need: install the Debian package when it is missing, or say loudly why not.

`require_tool("slurmctld", package="slurm-wlm munge", why="the Slurm executor tests")` returns the absolute
path of the binary. When the binary is missing and the tests run as root on a Debian-like system, it runs
`apt-get update` (once per test process) and `apt-get install -y --no-install-recommends <packages>`.
If the binary is still missing, the test *fails* under `CI=true` (CI must never skip silently) and is
skipped elsewhere, with a message naming the command that installs it.

Installs are serialised across the whole machine, not only inside one process: every pytest-xdist worker
(and every other test run on the machine) takes one `fcntl.flock` on `INSTALL_LOCK` before it runs apt, so
two workers never collide on apt's own locks. A process outside the suite (an operator's `apt-get`,
unattended upgrades) can still hold apt's locks: `apt-get update` does not wait for its lists lock even with
`-o DPkg::Lock::Timeout` (that option covers dpkg's locks only; measured in STACK-NOTES.md, "Installing while
another apt runs"), so each apt command is retried while apt answers "Could not get lock", for at most
`APT_LOCK_WAIT_S`, saying on stderr who holds the lock and that it waits.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import subprocess
import sys
import threading
import time
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

__all__ = [
    "APT_LOCK_WAIT_S",
    "INSTALL_LOCK",
    "apt_install",
    "forget_apt_update",
    "install_lock",
    "require_node_packages",
    "require_tool",
]

_APT_TIMEOUT_S = 900
#: How long an install waits for apt's locks (or the suite's own) before it gives up and says why.
APT_LOCK_WAIT_S = 600.0
_RETRY_EVERY_S = 5.0
#: One lock for the machine: every test process installing a package holds it.
INSTALL_LOCK = Path(os.environ.get("FLEET_TEST_INSTALL_LOCK", "/tmp/fleet-burnin-tests-apt.lock"))
_APT_BUSY = "Could not get lock"

_lock = threading.Lock()
_apt_updated = False
_install_failures: dict[str, str] = {}
# Where Debian puts daemons (slurmctld, munged): not always on a non-login root PATH.
_EXTRA_PATH = ("/usr/sbin", "/sbin", "/usr/local/sbin")


def require_tool(binary: str, *, package: str, why: str) -> str:
    """The absolute path of `binary`, installing the Debian `package` (space-separated names) if needed."""
    found = _which(binary)
    if found:
        return found
    packages = package.split()
    if not packages:
        raise ValueError("require_tool: package must name at least one Debian package")
    problem = apt_install(packages, unless=lambda: _which(binary) is not None)
    found = _which(binary)
    if found is None and problem is None:
        problem = f"installing {' '.join(packages)} did not provide {binary}"
    if found:
        return found
    command = f"apt-get install -y --no-install-recommends {' '.join(packages)}"
    message = (
        f"!!! {binary} is missing, so {why} cannot run: {problem}. "
        f"Install it with `sudo {command}` (Debian/Ubuntu) and run the tests again."
    )
    warnings.warn(message, stacklevel=2)
    print(message, file=sys.stderr)  # noqa: T201 - meant to be seen even without -ra
    if os.environ.get("CI") == "true":
        pytest.fail(message, pytrace=False)
    pytest.skip(message)


def _which(binary: str) -> str | None:
    path = os.environ.get("PATH", "")
    extra = os.pathsep.join(p for p in _EXTRA_PATH if p not in path.split(os.pathsep))
    found = shutil.which(binary, path=os.pathsep.join(p for p in (path, extra) if p))
    return os.path.abspath(found) if found else None


def apt_install(
    packages: list[str],
    *,
    unless: Callable[[], bool] | None = None,
    retry_every_s: float = _RETRY_EVERY_S,
    wait_at_most_s: float = APT_LOCK_WAIT_S,
) -> str | None:
    """Install `packages` under the machine-wide install lock: None on success, else why it could not be done.

    `unless` is asked again once the lock is held: another worker may have installed the package
    meanwhile, and then nothing is run."""
    key = " ".join(packages)
    with _lock:
        if key in _install_failures:
            return _install_failures[key]
        if os.geteuid() != 0:
            problem: str | None = "the tests are not running as root, so they cannot install it"
        elif shutil.which("apt-get") is None:
            problem = "there is no apt-get on this system to install it with"
        else:
            try:
                with install_lock(INSTALL_LOCK, retry_every_s=retry_every_s, wait_at_most_s=wait_at_most_s):
                    if unless is not None and unless():
                        return None
                    problem = _update_and_install(packages, retry_every_s, wait_at_most_s)
            except TimeoutError as exc:
                problem = str(exc)
        if problem is not None:
            _install_failures[key] = problem
        return problem


def forget_apt_update() -> None:
    """Run `apt-get update` again before the next install (the package lists may be old); for tests."""
    global _apt_updated
    with _lock:
        _apt_updated = False
        _install_failures.clear()


@contextlib.contextmanager
def install_lock(
    path: Path, *, retry_every_s: float = _RETRY_EVERY_S, wait_at_most_s: float = APT_LOCK_WAIT_S
) -> Iterator[None]:
    """Hold the machine-wide install lock (`flock` on `path`), waiting for another process that holds it, at
    most `wait_at_most_s` (`TimeoutError` then), and saying on stderr that it waits."""
    with open(path, "a") as handle:
        with contextlib.suppress(OSError):
            os.chmod(path, 0o666)  # a later run as another user may take it too
        deadline = time.monotonic() + wait_at_most_s
        said = False
        while True:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError(
                        f"another test process held the install lock {path} for more than {wait_at_most_s:g}s"
                    ) from None
                if not said:
                    _say(f"waiting for another test process's install to finish (install lock {path})")
                    said = True
                time.sleep(min(retry_every_s, left))
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _update_and_install(packages: list[str], retry_every_s: float, wait_at_most_s: float) -> str | None:
    """`apt-get update` (once per process) then the install. Caller holds the install lock."""
    global _apt_updated
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    deadline = time.monotonic() + wait_at_most_s
    if not _apt_updated:
        problem = _apt(["apt-get", "update"], env, deadline, retry_every_s)
        if problem is not None:
            return problem
        _apt_updated = True
    wait = f"DPkg::Lock::Timeout={int(max(1, wait_at_most_s))}"  # dpkg's own locks: apt waits for them itself
    return _apt(
        ["apt-get", "-o", wait, "install", "-y", "--no-install-recommends", *packages], env, deadline, retry_every_s
    )


def _apt(argv: list[str], env: dict[str, str], deadline: float, retry_every_s: float) -> str | None:
    """Run one apt command; while apt answers that another process holds its lock, wait and run it again, until
    `deadline`."""
    started = time.monotonic()
    while True:
        try:
            done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=_APT_TIMEOUT_S, check=False)
        except (OSError, subprocess.TimeoutExpired) as exc:
            return f"`{' '.join(argv)}` could not run: {exc}"
        if done.returncode == 0:
            return None
        said = (done.stderr or done.stdout).strip()
        busy = next((line for line in said.splitlines() if _APT_BUSY in line), None)
        left = deadline - time.monotonic()
        if busy is None or left <= 0:
            tail = " | ".join(said.splitlines()[-3:])
            gave_up = f" (gave up after {time.monotonic() - started:.0f}s of waiting)" if busy else ""
            return f"`{' '.join(argv)}` exited with status {done.returncode}: {tail}{gave_up}"
        pause = min(retry_every_s, left)
        _say(
            f"`{' '.join(argv)}`: {busy.removeprefix('E: ').strip()} — waiting, retrying in {pause:g}s "
            f"(at most {left:.0f}s more)"
        )
        time.sleep(pause)


def _say(message: str) -> None:
    print(f"tests.support.system: {message}", file=sys.stderr, flush=True)  # noqa: T201 - seen without -ra


def require_node_packages(folder: Path, *, why: str) -> Path:
    """`folder`'s npm packages installed exactly as its package-lock.json says (`npm ci`, once per
    lock), on the machine's Node.js (installed with apt when missing); returns `node`'s path. As for
    every tool: a failure fails the test under `CI=true` and skips it loudly elsewhere."""
    node = require_tool("node", package="nodejs npm", why=why)
    npm = require_tool("npm", package="npm", why=why)
    stamp = folder / "node_modules" / ".fleet-installed"
    lock = (folder / "package-lock.json").read_bytes()
    with install_lock(INSTALL_LOCK):
        if not stamp.exists() or stamp.read_bytes() != lock:
            _say(f"installing {folder.name}'s npm packages (npm ci) for {why}")
            done = subprocess.run(
                [npm, "ci", "--no-audit", "--no-fund"], cwd=folder, capture_output=True, text=True, timeout=600
            )
            if done.returncode != 0:
                message = f"npm ci in {folder} failed (needed for {why}): {done.stderr[-1500:]}"
                if os.environ.get("CI") == "true":
                    pytest.fail(message)
                pytest.skip(message)
            stamp.write_bytes(lock)
    return Path(node)
