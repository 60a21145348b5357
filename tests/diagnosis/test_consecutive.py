"""`consecutive_passes` in the reconcile derivation, on PostgreSQL."""

from __future__ import annotations

import pytest

from fleet.burnin.models import PolicyProgress
from tests.burnin.sweeps import sweep_service
from tests.burnin.test_reconcile import evaluate


@pytest.fixture
def target(fleet):
    site = fleet.site("lon-1")
    satellite = fleet.satellite(site, "sat-a")
    device = fleet.device(satellite, hostname="a01-n01")
    policy = fleet.policy("gpu.h200.8x")
    return site, device, policy


def verdict(requirement, device) -> str:
    sweep_service("lon-1", "sat-a", "gpu.h200.8x")
    return PolicyProgress.objects.get(requirement=requirement, device=device).verdict


def run(fleet, requirement, device, site, passed):
    evaluate(fleet.execution(requirement, device=device), requirement, site, passed=passed)


@pytest.mark.parametrize(
    ("k", "history", "expected"),
    [
        (1, [False, False, True], "passed"),  # today's rule: the latest decides
        (2, [False, False, True], "failed"),  # the pass after failures is not confirmed yet
        (2, [False, False, True, True], "passed"),
        (2, [True], "not_run"),  # one pass, none before it: not run enough
        (3, [True, True], "not_run"),
        (3, [True, True, True], "passed"),
        (3, [True, False, True, True], "failed"),
        (2, [True, True, False], "failed"),
    ],
)
def test_consecutive_passes(fleet, target, k, history, expected):
    site, device, policy = target
    requirement = fleet.requirement(policy, "gpu-diag", consecutive_passes=k)
    for passed in history:
        run(fleet, requirement, device, site, passed)
    assert verdict(requirement, device) == expected


def test_a_second_pass_confirms_the_first_on_the_next_sweep(fleet, target):
    site, device, policy = target
    requirement = fleet.requirement(policy, "gpu-diag", consecutive_passes=2)
    for passed in (False, False, True):
        run(fleet, requirement, device, site, passed)
    assert verdict(requirement, device) == "failed"
    run(fleet, requirement, device, site, True)
    assert verdict(requirement, device) == "passed"


def test_only_runs_since_the_policy_version_changed_count(fleet, target):
    from django.utils import timezone

    site, device, policy = target
    requirement = fleet.requirement(policy, "gpu-diag", consecutive_passes=2)
    run(fleet, requirement, device, site, True)
    policy.version_changed_at = timezone.now()
    policy.save(update_fields=["version_changed_at"])
    run(fleet, requirement, device, site, True)
    assert verdict(requirement, device) == "not_run"  # the earlier pass was under another version
    run(fleet, requirement, device, site, True)
    assert verdict(requirement, device) == "passed"


def test_the_attempts_endpoint_says_passed_after_3_attempts(fleet, target, bearer):
    site, device, policy = target
    requirement = fleet.requirement(policy, "gpu-diag", consecutive_passes=2)
    for passed in (False, False, True):
        run(fleet, requirement, device, site, passed)
    client = bearer(["fleet:read"])
    url = f"/api/v1/burn-in/sites/{site.id}/attempts/?requirement=gpu-diag&target={device.id}"
    body = client.get(url).json()
    assert [a["verdict"] for a in body["attempts"]] == ["failed", "failed", "passed"]
    assert body["summary"] == {"attempts": 3, "passed_after": 3, "consecutive_passes": 1, "flaky": True}
    assert body["consecutive_passes_required"] == 2 and verdict(requirement, device) == "failed"
    missing = client.get(f"/api/v1/burn-in/sites/{site.id}/attempts/?requirement=nope&target={device.id}")
    assert missing.status_code == 404
    assert client.get(f"/api/v1/burn-in/sites/{site.id}/attempts/?requirement=gpu-diag").status_code == 400
