"""`fleet demo` (the README's main command) brings up a service whose simulated fleet burns in."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest
from django.conf import global_settings

from fleet.autopilot.models import AutopilotAction
from fleet.burnin.models import FingerprintSnapshot, PolicyProgress, TestExecution
from fleet.burnin.reads.device import repair_checks
from fleet.jobs.models import JobDevice
from fleet.lifecycle.models import DeviceStateChange, Repair
from fleet_rules.vocabulary import RepairPartCheck
from tests.helpers import REPO, fleet_env, free_port

pytestmark = pytest.mark.e2e


def test_the_demo_serves_and_burns_in_the_example_fleet(transactional_db, settings, tmp_path):
    settings.PASSWORD_HASHERS = global_settings.PASSWORD_HASHERS
    port = free_port()
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "fleet",
            "demo",
            "--port",
            str(port),
            "--duration",
            # Long enough for a failure, its one attempt and the repair line on a loaded machine
            # (35 s failed 2 of 3 runs beside three other workers and a bench).
            "60",
            "--dispatch-every",
            "3",
            "--time-scale",
            "0.0005",
            "--max-attempts",
            "1",
            "--repair-after",
            "4",
        ],
        env=fleet_env(FLEET_DATA_DIR=str(tmp_path)),
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert result.returncode == 0, result.stderr[-4000:]
    # The URL and the login, once, in a box, with where the password is kept (0600).
    boxed = [line for line in result.stdout.splitlines() if line.startswith("│")]
    assert any(f"the dashboard: http://127.0.0.1:{port}/" in line for line in boxed), result.stdout[:3000]
    assert any("sign in as admin / " in line for line in boxed)
    password_file = tmp_path / "demo-admin-password"
    assert any(f"password kept in {password_file}" in line for line in boxed)
    assert result.stdout.count("sign in as admin / ") == 1
    assert password_file.stat().st_mode & 0o777 == 0o600
    title = "Burn-in progress: targets (a requirement × a device, or × a rack)"
    assert title in result.stdout
    # The table is printed when what it says changes, never twice the same in a row.
    tables = [
        block.split("active jobs:")[0] + block.split("active jobs:")[1].split("\n")[0]
        for block in result.stdout.split(title)[1:]
    ]
    repeats = [i for i in range(1, len(tables)) if tables[i] == tables[i - 1]]
    assert not repeats, f"{len(repeats)} of {len(tables)} tables repeat the one before"
    # One log format throughout: the server's, the agents' and the demo's own lines.
    log_line = re.compile(
        r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} (DEBUG|INFO|WARNING|ERROR|CRITICAL) [\w.]+( \[\S+\])?: "
    )
    other = [line for line in result.stderr.splitlines() if line.strip() and not log_line.match(line)]
    assert not other, other[:5]
    granian = [line for line in result.stdout.splitlines() if re.match(r"^\[(INFO|WARNING|ERROR)\] ", line)]
    assert not granian, granian[:3]  # the HTTP server's own lines in its own format
    served = [line for line in result.stdout.splitlines() if line.startswith("Serving fleet-burnin")]
    assert not served, served  # that line is a log line now (stderr)
    # The site's autopilot drives the burn-in and says why, in the one log format: what it
    # dispatched, on how many devices, with how many jobs, never more than its limit at once.
    dispatched = re.findall(
        r"^\S+ \S+ INFO fleet\.autopilot: lon-1: burn-in of (\d+) device\(s\): \S+: \d+ requirement\(s\) not run yet.* "
        r"\((\d+) jobs?\)$",
        result.stderr,
        re.M,
    )
    assert dispatched, result.stderr[-3000:]
    assert all(int(devices) <= 24 for devices, _ in dispatched)
    assert AutopilotAction.objects.filter(kind="dispatch").exists()
    # The failing targets are named with their reasons; after one failure (--max-attempts 1) the
    # service sends the device to repair, the demo's technician repairs it, and it burns in again.
    assert re.search(r"✗ lon-1/\S+ \S+ \(attempt 1\): \S+", result.stdout), result.stdout[-3000:]
    needs = re.findall(r"needs repair (lon-1/\S+): ", result.stdout)
    assert needs, result.stdout[-3000:]
    assert len(needs) == len(set(needs)) or "repaired" in result.stdout  # each step said once a round
    repaired = re.findall(
        r"repair recorded (lon-1/\S+): swapped GPU \d \(serial \d+ → \d+\); burning in again \(", result.stdout
    )
    assert repaired and set(repaired) <= set(needs), result.stdout[-3000:]
    assert Repair.objects.filter(device__hostname=repaired[0].split("/")[1]).exists()
    # The technician's swap is the simulated hardware's: what the repair records is what the
    # hardware reports after it (the device page's "✓ gpu N: installed … is reported", never a mismatch).
    checked = [
        check
        for repair in Repair.objects.select_related("device")
        for check in repair_checks(repair.device_id, [repair]).get(repair.id, [])
    ]
    read = [c for c in checked if c.outcome != RepairPartCheck.NOT_READ_YET]  # a re-burn-in that ran by now
    assert all(c.outcome == RepairPartCheck.SEEN and not c.mismatch for c in read), [c.text for c in read]
    assert DeviceStateChange.objects.filter(cause="repair").exists()
    verdicts = set(PolicyProgress.objects.values_list("verdict", flat=True))
    assert "passed" in verdicts
    assert TestExecution.objects.filter(status="completed").count() > 50
    # The AMD rack burns in beside the NVIDIA ones, with AMD's tools, read by the real parsers.
    amd = TestExecution.objects.filter(device__resource_class="gpu.mi300x.8x", status="completed")
    assert {"rvs-stress", "transferbench-a2a", "rccl-all-reduce", "health-window"} <= set(
        amd.values_list("requirement__test", flat=True)
    )
    window = amd.filter(requirement__test="health-window").first()
    assert window is not None and "amdgpu_ras_fatal_count" in window.metrics and "xid_fatal_count" not in window.metrics
    snapshot = FingerprintSnapshot.objects.filter(device__resource_class="gpu.mi300x.8x").first()
    assert snapshot is not None and snapshot.inventory["gpus"][0]["product_name"] == "AMD Instinct MI300X"
    assert not TestExecution.objects.filter(status="running").exists(), "shutdown left an execution running"
    assert not JobDevice.objects.filter(active=True, job__status="running").exists()
    assert "Traceback" not in result.stderr
    # The terminal tells the story: no line per served request, no warning from the HTTP server.
    output = result.stdout + result.stderr
    served = [line for line in output.splitlines() if " INFO fleet.request" in line]
    assert not served, served[:3]
    assert "Lifespan errored" not in output
