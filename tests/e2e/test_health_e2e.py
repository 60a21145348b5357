"""A fatal Xid during a passing burn-in, end to end: a real `fleet serve`, a real `fleet-agent` burns a
device in (every test passes), then the health window's report carrying `Xid 79` reaches the service
through the agent's own client (`FleetClient.report_execution`): the device is in needs_repair at
once with the Xid in the reason, the agent's next cycle judges the health requirement failed, and the
signed evidence pack holds the event.

The agent's `health-window` test and its fatal-Xid fault knob are built in parallel (issue 29, the
agent side); until they are in, the report is posted here through the client, in the shape the wire
contract fixes, and the agent's own run of `health-window` errors ("no model") or passes.
"""

from __future__ import annotations

import io
import json
import uuid
import zipfile

import pytest
from django.utils import timezone

from fleet.burnin.models import PolicyProgress
from fleet.inventory.models import Device
from fleet.jobs.models import Job
from fleet_agent.client import FleetClient
from fleet_rules.vocabulary import DeviceState
from tests.burnin.test_evidence_pack import independent_verify
from tests.support.stack import EXAMPLE, running_stack

pytestmark = pytest.mark.e2e

RC = "gpu.h200.8x"
HEALTH_REQUIREMENT = """\
      - name: gpu-health-window
        gate: burn-in
        scope: single_node
        test: health-window
        thresholds:
          - {metric: xid_fatal_count, comparator: eq, threshold: 0}
          - {metric: row_remap_pending, comparator: eq, threshold: 0}
          - {metric: ecc_uncorrected_delta, comparator: eq, threshold: 0}
          - {metric: hw_slowdown_seen, comparator: eq, threshold: 0}
"""


def fleet_text() -> str:
    """The example fleet, with the health requirement when the example does not have it yet."""
    text = EXAMPLE.read_text()
    if "gpu-health-window" in text:
        return text
    anchor = f"  - resource_class: {RC}\n"
    head, tail = text.split(anchor, 1)
    before, after = tail.split("    requirements:\n", 1)
    return f"{head}{anchor}{before}    requirements:\n{HEALTH_REQUIREMENT}{after}"


@pytest.fixture
def health_stack(transactional_db, settings, tmp_path):
    with running_stack(settings, tmp_path, fleet_text=fleet_text()) as running:
        yield running


def test_a_fatal_xid_during_a_passing_burn_in_sends_the_device_to_repair(health_stack):
    stack = health_stack
    env = {"FLEET_AGENT_FAULTY_SHARE": "0", "FLEET_AGENT_ERRORED_SHARE": "0"}
    device = Device.objects.get(hostname="a01-n01")
    stack.agent("once", **env)  # the satellite announces its workflows
    dispatched = stack.dispatch([device.id], mode="all")
    (job,) = dispatched["created_jobs"]
    stack.agent("once", **env)

    verdicts = dict(
        PolicyProgress.objects.filter(device=device)
        .exclude(requirement__name="gpu-health-window")
        .values_list("requirement__name", "verdict")
    )
    assert verdicts and set(verdicts.values()) == {"passed"}, verdicts  # every test passed
    assert Device.objects.get(id=device.id).state == DeviceState.BURN_IN

    # The health window's report, as the agent sends it (wire contract of issue 29).
    started = Job.objects.get(id=job["job_id"]).created_at
    at = timezone.now()
    execution_id = str(uuid.uuid4())
    client = FleetClient(stack.base, stack.client_id, stack.client_secret)
    try:
        reported = client.report_execution(
            execution_id,
            {
                "requirement": "gpu-health-window",
                "device_id": str(device.id),
                "job_id": job["job_id"],
                "status": "completed",
                "started_at": started.isoformat(),
                "finished_at": at.isoformat(),
                "metrics": {
                    "xid_count": {"value": 2},
                    "xid_fatal_count": {"value": 1},
                    "ecc_uncorrected_volatile": {"value": 0},
                    "ecc_uncorrected_aggregate": {"value": 0},
                    "retired_pages_dbe": {"value": 0},
                    "row_remap_pending": {"value": 0},
                    "row_remap_failure": {"value": 0},
                    "ecc_uncorrected_delta": {"value": 0},
                    "hw_slowdown_seen": {"value": 0},
                },
                "health": {
                    "window": {"since": started.isoformat(), "until": at.isoformat()},
                    "source": "simulated",
                    "xid_events": [
                        {
                            "kind": "xid",
                            "code": 13,
                            "pci_bus_id": "0000:3b:00",
                            "message": "Graphics SM Warp Exception on (GPC 0, TPC 1, SM 0): Out Of Range Address",
                            "at": at.isoformat(),
                        },
                        {
                            "kind": "xid",
                            "code": 79,
                            "pci_bus_id": "0000:3b:00",
                            "message": "GPU has fallen off the bus.",
                            "at": at.isoformat(),
                        },
                    ],
                    "ecc": {"before": {"ecc_uncorrected_aggregate": 0}, "after": {"ecc_uncorrected_aggregate": 0}},
                    "throttle_reasons_seen": [],
                },
            },
        )
    finally:
        client.close()
    assert reported["health"]["xid_events"][1]["code"] == 79

    # At once, in the report's transaction: needs_repair, the Xid in the reason.
    assert Device.objects.get(id=device.id).state == DeviceState.NEEDS_REPAIR
    history = stack.operator.get(f"/api/v1/devices/{device.id}/history/").json()["results"]
    assert history[0]["cause"] == "fatal_xid" and history[0]["to_state"] == "needs_repair"
    assert history[0]["reason"].startswith("Xid 79 (GPU has fallen off the bus) on 0000:3b:00 at ")
    assert history[0]["refs"]["execution"] == execution_id
    queue = stack.operator.get(f"/api/v1/burn-in/sites/{device.site_id}/repair-queue/").json()["results"]
    assert [(q["hostname"], q["cause"]) for q in queue] == [("a01-n01", "fatal_xid")]

    # The agent's next cycle evaluates the window's numbers: the health requirement fails.
    stack.agent("once", **env)
    health_verdict = PolicyProgress.objects.get(device=device, requirement__name="gpu-health-window").verdict
    assert health_verdict == "failed"
    assert Device.objects.get(id=device.id).state == DeviceState.NEEDS_REPAIR

    # The evidence pack holds the event, and verifies without this code.
    pack = stack.operator.get(f"/api/v1/devices/{device.id}/evidence-pack/")
    assert pack.status_code == 200
    keys = stack.operator.get("/api/v1/certificates/keys/").json()
    assert independent_verify(pack.content, keys)
    with zipfile.ZipFile(io.BytesIO(pack.content)) as archive:
        manifest = json.loads(archive.read("manifest.json"))
        (report,) = manifest["health"]["reports"]
        assert report["execution_id"] == execution_id
        assert [(e["code"], e["meaning"]) for e in report["fatal_events"]] == [(79, "GPU has fallen off the bus")]
        assert json.loads(archive.read(report["file"]))["health"]["xid_events"][1]["code"] == 79
    assert manifest["state_history"]["changes"][0]["cause"] == "fatal_xid"
    failing = {t["requirement"]["name"] for t in manifest["targets"]}
    assert "gpu-health-window" in failing
