"""The outlier groups a process keeps are reused only while the site's passed evidence is what
they were computed from (`fleet.burnin.diagnosis.outliers._group_rows`): a renewed pass, a pass
lost or a pass gained moves the mark and the next read recomputes; nothing stale is shown."""

from __future__ import annotations

from django.db import connection
from django.test.utils import CaptureQueriesContext

from fleet.burnin.diagnosis.outliers import site_outlier_groups
from fleet.burnin.evaluation_results.service import evaluation_results_upsert
from fleet.burnin.models import PolicyProgress
from fleet.policies.models import Requirement
from fleet_rules.evaluations import ResultItem
from fleet_rules.evaluator import evaluate
from fleet_rules.vocabulary import Verdict
from tests.burnin.sweeps import sweep_service
from tests.diagnosis.test_outliers import SIBLINGS, THRESHOLDS, seed


def named(site) -> list[str]:
    with CaptureQueriesContext(connection) as queries:
        (group,) = site_outlier_groups(site=site)
    assert len(queries) == 3  # requirements, rules, one statement: kept or not
    return [o.hostname for o in group.verdict.outliers]


def rerun(fleet, device, value: float) -> None:
    """A newer passing execution of the device, evaluated and reconciled as in production."""
    requirement = Requirement.objects.get(name="nccl-local")
    metrics = {"busbw_gbps": {"value": value + 5, "statistics": {"min": value}}}
    execution = fleet.execution(requirement, device=device, metrics=metrics)
    payload = evaluate(status="completed", metrics=metrics, rules=THRESHOLDS)
    key = fleet.source_key(requirement, device.site)
    evaluation_results_upsert(items=[ResultItem(execution.id, payload, key, execution.updated_at)], actor=None)
    sweep_service("lon-1", "sat-a", "gpu.h200.8x")


def test_kept_groups_follow_a_renewed_pass_a_lost_pass_and_a_new_one(fleet):
    site, devices = seed(fleet, SIBLINGS + [320.0])
    assert named(site) == ["a01-n09"]
    assert named(site) == ["a01-n09"]  # the same evidence: the kept figures
    rerun(fleet, devices[9], 400.0)  # the same count of passed rows, another execution
    assert named(site) == []
    rerun(fleet, devices[9], 321.0)
    assert named(site) == ["a01-n09"]
    PolicyProgress.objects.filter(device=devices[9]).update(verdict=Verdict.FAILED)  # one pass fewer
    assert named(site) == []
