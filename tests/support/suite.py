"""How the suite is sorted and checked (docs/reliability.md, "The suite"): the markers of the tests
that start something, the markers the shared fixtures give the tests that use them, and a check
that no test starts a process without saying so.

The markers (registered in pyproject.toml, where `--strict-markers` refuses any other):

- `browser`: drives a real Chromium (Playwright);
- `e2e`: runs real `fleet serve` / `fleet-agent` / `fleet demo` processes;
- `slurm`: needs the private Slurm cluster (munged, slurmctld, slurmd);
- `faults`: a PostgreSQL of its own or a database cut under a running server (fault injection);
- `slow`: long property-based (Hypothesis, schemathesis) or otherwise slow in-process runs;
- `process`: starts a short-lived process and waits for it (`python -c`, a `fleet` command, promtool,
  pg_dump), no server.

`make test-fast` runs the tests that carry none of them; `make test` runs every test.

The check: an audit hook (PEP 578) records every process a test starts (`subprocess`, `os.fork`,
`os.posix_spawn`, `os.exec*`, `os.system`) during its setup and its call, except inside fixtures
of a wider scope than the test (the session's database, a module's private PostgreSQL or browser:
those run once, for tests marked by the fixtures that need them). A test that started one and
carries none of the markers fails, naming what it started.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator
from typing import Any

import pytest
from _pytest.nodeid import NodeId

#: Marker -> what belongs there; a test carrying any of them starts something (not in `make test-fast`).
MARKERS = {
    "browser": "drives a real Chromium through Playwright",
    "e2e": "runs real fleet serve / fleet-agent / fleet demo processes",
    "slurm": "needs the private Slurm cluster (munged, slurmctld, slurmd)",
    "faults": "a private PostgreSQL or a database cut under a running server (fault injection)",
    "slow": "a long property-based (Hypothesis, schemathesis) or otherwise slow in-process run",
    "process": "starts a short-lived process and waits for it (python -c, a fleet command, a system tool)",
}

#: Fixtures that start something, the markers they give every test that uses them (directly or
#: through another fixture), and the xdist group that keeps their tests on one worker (one browser
#: for the run, not one per worker), or None. `{module}` in a group is the test's module: each
#: Slurm module runs on one worker with a private cluster of its own (free ports, its own folder),
#: the two modules side by side (one after the other they were the run's longest part).
FIXTURE_MARKERS: dict[str, tuple[tuple[str, ...], str | None]] = {
    "chromium": (("browser", "e2e"), "browser"),
    "stack": (("e2e",), None),
    "slurm": (("slurm",), "slurm-{module}"),
}

_SPAWN_EVENTS = frozenset(
    {"subprocess.Popen", "os.system", "os.posix_spawn", "os.exec", "os.fork", "os.forkpty", "os.spawn"}
)


def mark_by_fixtures(items: list[pytest.Item]) -> None:
    """Give each test the markers (and xdist group) of the process-starting fixtures it uses."""
    for item in items:
        used = set(getattr(item, "fixturenames", ()))
        for fixture, (markers, group) in FIXTURE_MARKERS.items():
            if fixture not in used:
                continue
            for name in markers:
                if item.get_closest_marker(name) is None:
                    item.add_marker(name)
            if group is not None and item.get_closest_marker("xdist_group") is None:
                module = item.module.__name__.rsplit(".", 1)[-1] if getattr(item, "module", None) else ""
                item.add_marker(pytest.mark.xdist_group(group.format(module=module)))


def group_ids(config: pytest.Config, items: list[pytest.Item]) -> None:
    """`--dist loadgroup` on pytest 9.2: give each test's node id its `@group` suffix here.

    pytest-xdist (3.8) sends a test of an `xdist_group` to its group's worker by that suffix, which
    its worker adds by setting `item._nodeid`; pytest 9.2 keeps the id elsewhere (`item._id`), so the
    suffix never appeared and every group was scattered over the workers (seen: three Slurm clusters
    in one run). Done here, before xdist's own hook, which then finds nothing left to do."""
    if not getattr(config.option, "loadgroup", False):
        return
    for item in items:
        names = sorted(
            {str(m.args[0] if m.args else m.kwargs.get("name", "default")) for m in item.iter_markers("xdist_group")}
        )
        if names and "@" not in item.nodeid:
            item._id = NodeId.parse(f"{item.nodeid}@{'_'.join(names)}")


def refuse_duplicate_ids(items: list[pytest.Item]) -> None:
    """Every test has its own node id: pytest-xdist schedules by id and runs one test of several
    that share one (the others silently not at all)."""
    seen: set[str] = set()
    repeated = sorted({item.nodeid for item in items if item.nodeid in seen or seen.add(item.nodeid)})
    if repeated:
        raise pytest.UsageError(f"{len(repeated)} test id(s) name more than one test: {', '.join(repeated[:5])}")


def starts_something(item: pytest.Item) -> bool:
    return any(item.get_closest_marker(name) is not None for name in MARKERS)


class SpawnRecorder:
    """What the running test started (an audit hook cannot be removed: it records only while on)."""

    def __init__(self) -> None:
        self._on = False
        self._paused = 0
        self.started: list[str] = []

    def install(self) -> None:
        sys.addaudithook(self._hook)

    def _hook(self, event: str, args: tuple[Any, ...]) -> None:
        if not self._on or self._paused or event not in _SPAWN_EVENTS or _looking_up_a_library():
            return
        self.started.append(_describe(event, args))

    def begin(self) -> None:
        self.started = []
        self._paused = 0
        self._on = True

    def end(self) -> list[str]:
        self._on = False
        return self.started

    @contextlib.contextmanager
    def paused(self) -> Iterator[None]:
        self._paused += 1
        try:
            yield
        finally:
            self._paused -= 1


def _looking_up_a_library() -> bool:
    """`ctypes.util.find_library` runs ldconfig and gcc: an import looking for a shared library (the
    first import of `django.contrib.gis` does, in whichever test needs it first), not a test's process."""
    frame = sys._getframe(2)
    while frame is not None:
        if frame.f_globals.get("__name__") == "ctypes.util":
            return True
        frame = frame.f_back
    return False


def _describe(event: str, args: tuple[Any, ...]) -> str:
    if event == "subprocess.Popen" and len(args) >= 2:
        argv = args[1]
        if isinstance(argv, str | bytes):
            return str(argv)[:120]
        return " ".join(str(a) for a in list(argv)[:4])[:120]
    if event in {"os.system", "os.exec", "os.posix_spawn", "os.spawn"} and args:
        return f"{event} {str(args[0])[:100]}"
    return event


def unmarked_spawn_message(item: pytest.Item, started: list[str]) -> str:
    shown = "; ".join(dict.fromkeys(started))
    return (
        f"{item.nodeid} started {len(started)} process(es) ({shown}) but carries none of the markers "
        f"{', '.join(MARKERS)}: mark it (pytestmark in its module, or a fixture in "
        "tests/support/suite.py FIXTURE_MARKERS), so that `make test-fast` leaves it out"
    )


class SpawnCheck:
    """The check, as a pytest plugin (registered by tests/conftest.py)."""

    name = "fleet-spawn-check"

    def __init__(self) -> None:
        self.recorder = SpawnRecorder()
        self.recorder.install()

    @pytest.hookimpl(wrapper=True)
    def pytest_fixture_setup(self, fixturedef: pytest.FixtureDef[Any], request: pytest.FixtureRequest):
        """What a session or module fixture starts is its own, not the first test's that uses it."""
        if fixturedef.scope == "function":
            return (yield)
        with self.recorder.paused():
            return (yield)

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_setup(self, item: pytest.Item):
        self.recorder.begin()
        return (yield)

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_call(self, item: pytest.Item):
        try:
            result = yield
        finally:
            started = self.recorder.end()
        if started and not starts_something(item):
            pytest.fail(unmarked_spawn_message(item, started), pytrace=False)
        return result

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_teardown(self, item: pytest.Item, nextitem: pytest.Item | None):
        self.recorder.end()
        return (yield)
