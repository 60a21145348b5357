"""The site's flaky rates and passes after failures are read from the outcomes the reconcile keeps
on each projection row (`PolicyProgress.outcomes`), and the failures list is ordered by the
execution's finish time the row keeps (`PolicyProgress.finished_at`). Held here to the attempts themselves (each
target's history, read as the device page reads it): with several attempts landing between two
sweeps, errors, running attempts, a repair and a policy version change."""

from __future__ import annotations

from collections import defaultdict

import pytest
from django.utils import timezone

from fleet.burnin.diagnosis.attempts import attempt_summaries, passes_after_failures
from fleet.burnin.models import PolicyProgress
from fleet.burnin.reads.site import site_progress
from fleet.inventory.models import Device
from fleet.policies.models import AcceptancePolicy
from fleet.repairs.services import repair_record
from fleet_rules.attempts import Outcomes
from fleet_rules.vocabulary import DeviceState, RepairRerun, WorkflowName
from tests.burnin.certs import evaluate_now, sweep

pytestmark = pytest.mark.django_db

RC = "gpu.h200.8x"
PASS = {"diag_failed_tests": {"value": 0}}
FAIL = {"diag_failed_tests": {"value": 2}}


def _from_history(site):
    """Flaky and judged per requirement, and the passes after failures, from every target's attempts."""
    rows = list(PolicyProgress.objects.filter(site=site).select_related("requirement"))
    summaries = attempt_summaries([(p.requirement_id, p.target_id) for p in rows])
    flaky: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    passed_after = set()
    for p in rows:
        summary = summaries[(p.requirement_id, p.target_id)]
        counts = flaky[p.requirement.name]
        counts[0] += summary.flaky
        counts[1] += summary.attempts > 0
        if summary.passed_after is not None and p.verdict == "passed":
            passed_after.add((p.requirement.name, p.target_id))
    return {name: tuple(c) for name, c in flaky.items() if c[1]}, passed_after


def _from_projection(site):
    rates = {name: (r.flaky, r.judged) for name, r in site_progress(site).flaky.get(RC, {}).items()}
    after = {(p.requirement, p.device_id or p.topology_id) for p in passes_after_failures(site)}
    return rates, after


def test_the_projection_s_outcomes_say_what_every_attempt_says(fleet):
    site = fleet.site("lon-1")
    satellite = fleet.satellite(site, "sat-a", workflows=list(WorkflowName.values))
    policy = fleet.policy(RC)
    policy.breaker_share = 1.0
    policy.save()
    diag = fleet.requirement(policy, "gpu-diag")
    rack_diag = fleet.requirement(policy, "rack-diag", scope="multi_node")
    fleet.profile(RC, "dcgm-diag", {"level": 3})
    rack = fleet.topology(satellite, "rack", "rack-z")
    d = {
        name: fleet.device(satellite, RC, hostname=name)
        for name in ("fails-then-passes", "passes", "errs-then-fails", "running", "repaired")
    }
    d["untried"] = fleet.device(satellite, RC, hostname="untried", topologies=[rack])

    def report(device, metrics=PASS, status="completed"):
        execution = fleet.execution(diag, device=device, metrics=metrics, status=status)
        if status != "running":
            evaluate_now(execution)

    # Two attempts of one target land between two sweeps: the sweep sees only the latest as its verdict.
    report(d["fails-then-passes"], FAIL)
    report(d["fails-then-passes"])
    report(d["passes"])
    report(d["errs-then-fails"], status="errored")
    report(d["errs-then-fails"], FAIL)
    report(d["running"], status="running")
    for metrics in (FAIL, PASS):  # a rack's attempts: its row is the topology's
        evaluate_now(fleet.execution(rack_diag, topology=rack, metrics=metrics))
    for _ in range(3):
        report(d["repaired"], FAIL)
        sweep(satellite)
    assert Device.objects.get(id=d["repaired"].id).state == DeviceState.NEEDS_REPAIR
    sweep(satellite)

    # The row keeps its execution's finish time too (the failures list's order).
    for row in PolicyProgress.objects.filter(site=site).select_related("execution"):
        assert row.finished_at == (row.execution.finished_at if row.execution else None), row
    assert PolicyProgress.objects.filter(site=site, finished_at__isnull=False).count() == 5  # not "running"
    assert PolicyProgress.objects.get(topology=rack).outcomes == Outcomes.FAILED | Outcomes.PASSED
    devices = PolicyProgress.objects.filter(site=site, device__isnull=False)
    stored = dict(devices.values_list("device__hostname", "outcomes"))
    assert stored == {
        "fails-then-passes": Outcomes.FAILED | Outcomes.PASSED,
        "passes": Outcomes.PASSED,
        "errs-then-fails": Outcomes.ERRORED | Outcomes.FAILED,
        "running": 0,
        "repaired": Outcomes.FAILED,
        "untried": 0,
    }
    # Flaky of judged per requirement, and the passes after failures: the same before and after
    # the repair below (the repaired device failed only; after the repair it passed only).
    expected = (
        {"gpu-diag": (2, 4), "rack-diag": (1, 1)},
        {("gpu-diag", d["fails-then-passes"].id), ("rack-diag", rack.id)},
    )
    assert _from_projection(site) == _from_history(site) == expected

    # A repair starts the count again: its failures no longer count, then it passes once.
    repair_record(device_id=d["repaired"].id, summary="reseated", parts=[], rerun=RepairRerun.ALL, actor="user:ops")
    assert PolicyProgress.objects.get(device=d["repaired"]).outcomes == 0
    report(d["repaired"])
    sweep(satellite)
    assert PolicyProgress.objects.get(device=d["repaired"]).outcomes == Outcomes.PASSED
    assert _from_projection(site) == _from_history(site) == expected

    # A new policy version: no attempt before it counts; the rows of the old version are not read.
    AcceptancePolicy.objects.filter(id=policy.id).update(version=2, version_changed_at=timezone.now())
    assert _from_projection(site) == ({}, set())
    sweep(satellite)
    report(d["passes"], FAIL)
    report(d["passes"])
    sweep(satellite)
    assert _from_projection(site) == _from_history(site) == ({"gpu-diag": (1, 1)}, {("gpu-diag", d["passes"].id)})


def test_a_class_whose_policy_has_no_requirement_yet_still_shows_its_policy_version(fleet):
    site = fleet.site("lon-2")
    satellite = fleet.satellite(site, "sat-b")
    fleet.policy("gpu.new.8x", version=3)
    fleet.device(satellite, "gpu.new.8x")
    (only,) = site_progress(site).classes
    assert (only.resource_class, only.policy_version, only.acceptance.enrolled) == ("gpu.new.8x", 3, 1)
