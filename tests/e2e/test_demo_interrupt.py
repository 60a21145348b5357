"""Ctrl-C on `make run` while jobs run (issue 43, item 1): the terminal sends SIGINT to its
foreground process group. The demo's server and agents are in groups of their own, so the demo
alone gets it and stops them in order — the agents hand back their jobs while the server still
answers, then the server — and every process is gone within 15 s, with no traceback and no ERROR."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import psutil
import pytest
from django.conf import global_settings

from fleet.burnin.models import TestExecution
from fleet.jobs.models import Job
from fleet_rules.vocabulary import ExecutionStatus, JobStatus
from tests.helpers import REPO, fleet_env, free_port

pytestmark = pytest.mark.e2e

STOPPED_WITHIN_S = 15


def test_ctrl_c_while_jobs_run_stops_every_process_of_the_demo_within_15_s_cleanly(
    transactional_db, settings, tmp_path
):
    settings.PASSWORD_HASHERS = global_settings.PASSWORD_HASHERS
    out, err = (tmp_path / "stdout.log").open("w+"), (tmp_path / "stderr.log").open("w+")
    demo = subprocess.Popen(
        [sys.executable, "-m", "fleet", "demo", "--port", str(free_port()), "--dispatch-every", "2"],
        env=fleet_env(FLEET_DATA_DIR=str(tmp_path)),
        cwd=REPO,
        stdout=out,
        stderr=err,
        text=True,
        start_new_session=True,  # its own process group, as a terminal's foreground job has
    )
    try:
        # Given jobs that agents have claimed and are running now.
        deadline = time.monotonic() + 180
        while Job.objects.filter(status=JobStatus.RUNNING).count() < 3:
            assert demo.poll() is None, _tail(out, err)
            assert time.monotonic() < deadline, "no jobs ran within 180 s\n" + _tail(out, err)
            time.sleep(0.2)
        processes = [psutil.Process(demo.pid), *psutil.Process(demo.pid).children(recursive=True)]
        running = Job.objects.filter(status=JobStatus.RUNNING).count()

        # When Ctrl-C: SIGINT to the demo's process group.
        os.killpg(demo.pid, signal.SIGINT)
        started = time.monotonic()
        _, alive = psutil.wait_procs(processes, timeout=STOPPED_WITHIN_S)
        took = time.monotonic() - started
    finally:
        if demo.poll() is None:
            os.killpg(demo.pid, signal.SIGKILL)
            demo.wait()

    # Then every process of the demo is gone in time, and the terminal shows no traceback and no error.
    log = _tail(out, err, 10_000)
    assert not alive, f"still running {STOPPED_WITHIN_S} s after Ctrl-C: {[p.pid for p in alive]}\n{log}"
    assert len(processes) >= 4, processes  # the demo, the server (and its workers), two agents
    output = _tail(out, err, 10**9)
    assert "Traceback" not in output, log
    errors = [line for line in output.splitlines() if " ERROR " in line or "retrying" in line]
    assert not errors, errors[:5]
    assert "stopped: every process of the demo has exited" in output
    # The agents handed their jobs back while the server answered: none is left running, nor any execution.
    assert running >= 3
    assert not Job.objects.filter(status=JobStatus.RUNNING).exists()
    assert not TestExecution.objects.filter(status=ExecutionStatus.RUNNING).exists()
    assert took < STOPPED_WITHIN_S


def _tail(out, err, chars: int = 3000) -> str:
    out.seek(0)
    err.seek(0)
    return (out.read()[-chars:] + "\n--- stderr ---\n" + err.read()[-chars:]).strip()
