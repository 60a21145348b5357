"""System tools the tests need: install the Debian package when it is missing, or say loudly why not.

`require_tool("slurmctld", package="slurm-wlm munge", why="the Slurm executor tests")` returns the absolute
path of the binary. When the binary is missing and the tests run as root on a Debian-like system, it runs
`apt-get update` (once per test session) and `apt-get install -y --no-install-recommends <packages>`.
If the binary is still missing, the test *fails* under `CI=true` (CI must never skip silently) and is
skipped elsewhere, with a message naming the command that installs it.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import threading
import warnings

import pytest

__all__ = ["require_tool"]

_APT_TIMEOUT_S = 900
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
    with _lock:
        found = _which(binary)
        if found is None:
            problem = _install(packages)
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


def _install(packages: list[str]) -> str | None:
    """Try to install `packages`; None on success, else why it could not be done. Caller holds `_lock`."""
    global _apt_updated
    key = " ".join(packages)
    if key in _install_failures:
        return _install_failures[key]
    if os.geteuid() != 0:
        problem = "the tests are not running as root, so they cannot install it"
    elif shutil.which("apt-get") is None:
        problem = "there is no apt-get on this system to install it with"
    else:
        env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
        problem = None
        if not _apt_updated:
            problem = _apt(["apt-get", "update"], env)
            _apt_updated = problem is None
        if problem is None:
            problem = _apt(["apt-get", "install", "-y", "--no-install-recommends", *packages], env)
    if problem is not None:
        _install_failures[key] = problem
    return problem


def _apt(argv: list[str], env: dict[str, str]) -> str | None:
    try:
        done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=_APT_TIMEOUT_S, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"`{' '.join(argv)}` could not run: {exc}"
    if done.returncode != 0:
        tail = " | ".join((done.stderr or done.stdout).strip().splitlines()[-3:])
        return f"`{' '.join(argv)}` exited with status {done.returncode}: {tail}"
    return None
