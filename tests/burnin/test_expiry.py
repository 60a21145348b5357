"""Evidence expiry: a pass older than its requirement's `evidence_valid_for` is `expired` after the
next sweep, a `non_passing` dispatch reruns it, and the certificate's `valid_until` said when."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from fleet.burnin.models import AcceptanceCertificate, PolicyProgress
from fleet.burnin.reruns.service import rerun_dispatch
from fleet.fleetfile.apply import fleet_apply
from fleet.fleetfile.document import FleetFileError, parse_text
from fleet.fleetfile.export import fleet_export, to_yaml
from fleet.policies.models import Requirement
from fleet_rules.vocabulary import PlanningMode, WorkflowName
from tests.burnin.certs import current, evaluate_now, sweep

RC = "gpu.h200.8x"
GOOD = {"diag_failed_tests": {"value": 0}}


@pytest.fixture
def clock(monkeypatch):
    """Move the service's clock forward (every `timezone.now()` reads it)."""
    real = timezone.now
    offset = [timedelta(0)]
    monkeypatch.setattr(timezone, "now", lambda: real() + offset[0])

    def advance(delta: timedelta) -> None:
        offset[0] += delta

    return advance


def test_an_expired_pass_is_expired_after_the_next_sweep_rerun_by_non_passing_and_valid_until_said_when(fleet, clock):
    site = fleet.site("lon-1")
    satellite = fleet.satellite(site, "sat-a", workflows=[WorkflowName.SINGLE_NODE])
    policy = fleet.policy(RC)
    diag = fleet.requirement(policy, "gpu-diag", test="dcgm-diag")
    soak = fleet.requirement(policy, "soak", test="soak")
    Requirement.objects.filter(id=diag.id).update(evidence_valid_for=timedelta(days=30))
    fleet.profile(RC, "dcgm-diag", {"level": 3})
    fleet.profile(RC, "soak", {"hours": 1})
    device = fleet.device(satellite, RC)
    diag_run = fleet.execution(diag, device=device, metrics=GOOD)
    evaluate_now(diag_run, fleet.execution(soak, device=device, metrics=GOOD))
    sweep(satellite)

    certificate = current(device)
    diag_run.refresh_from_db()
    assert certificate.valid_until == diag_run.finished_at + timedelta(days=30)
    assert certificate.document["valid_until"] is not None
    by_name = {r["name"]: r for r in certificate.document["requirements"]}
    assert by_name["soak"]["evidence_valid_until"] is None

    # A non_passing dispatch while the pass counts: already satisfied.
    outcome = rerun_dispatch(site=site, device_ids=[device.id], mode=PlanningMode.NON_PASSING, requested_by="test")
    assert not outcome.planned_jobs

    clock(timedelta(days=30, seconds=1))
    totals = sweep(satellite)
    assert totals.written == 1 and totals.unchanged == 1
    row = PolicyProgress.objects.get(requirement=diag, device=device)
    assert row.verdict == "expired" and row.execution_id == diag_run.id
    assert timezone.now() > certificate.valid_until  # what the certificate had said
    certificate.refresh_from_db()
    assert certificate.supersede_reason == "expired"
    assert current(device) is None
    assert sweep(satellite).unchanged == 2  # expired stays expired: nothing rewritten

    outcome = rerun_dispatch(site=site, device_ids=[device.id], mode=PlanningMode.NON_PASSING, requested_by="test")
    [job] = outcome.planned_jobs
    assert [r.name for r in job.requirements] == ["gpu-diag"]

    # A fresh pass: certified again, chained to the expired certificate.
    evaluate_now(fleet.execution(diag, device=device, metrics=GOOD))
    sweep(satellite)
    assert current(device).previous_id == certificate.serial
    assert AcceptanceCertificate.objects.filter(device=device).count() == 2


def test_the_fleet_file_reads_writes_and_checks_evidence_valid_for(db):
    text = """
policies:
  - resource_class: gpu.x
    requirements:
      - name: gpu-diag
        gate: burn-in
        test: dcgm-diag
        evidence_valid_for: 30d
        thresholds: [{metric: diag_failed_tests, comparator: eq, threshold: 0}]
"""
    fleet_apply(document=parse_text(text))
    assert Requirement.objects.get().evidence_valid_for == timedelta(days=30)
    assert "evidence_valid_for: 30d" in to_yaml(fleet_export())
    summary = fleet_apply(document=parse_text(text.replace("30d", "12h")))
    assert summary.policy_versions == {"gpu.x": (1, 2)}
    with pytest.raises(FleetFileError) as bad:
        parse_text(text.replace("30d", "a month"))
    assert bad.value.problems[0][0] == "policies[0].requirements[0].evidence_valid_for"
