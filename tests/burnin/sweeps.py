"""Helpers to run whole reconcile sweeps and to compute the projection independently."""

from __future__ import annotations

from fleet.burnin.models import EvaluationResult, PolicyProgress, TestExecution
from fleet.burnin.reconcile.service import ReconcilePage, reconcile_sweep
from fleet.inventory.models import Device, Topology
from fleet.policies.models import Requirement
from fleet.policies.selectors import load_resolutions

RECONCILE = "/api/v1/burn-in/policy-progress/reconcile/"


def sweep_service(site_slug, satellite_name, resource_class, *, limit=500, gate=None) -> list:
    """Run a sweep to its end through the service; returns every page."""
    return reconcile_sweep(
        site_slug=site_slug, satellite_name=satellite_name, resource_class=resource_class, gate=gate, limit=limit
    ).pages


def sweep_api(client, body: dict) -> list[dict]:
    """Run a sweep to its end through the view; returns every page's JSON."""
    pages: list[dict] = []

    def post(cursor):
        response = client.post(RECONCILE, body | {"cursor": cursor}, format="json")
        assert response.status_code == 200, response.content
        pages.append(response.json())
        return ReconcilePage(**pages[-1])

    reconcile_sweep(
        site_slug=body["site_slug"],
        satellite_name=body["satellite_name"],
        resource_class=body["resource_class"],
        limit=body.get("limit") or 500,
        fetch_page=post,
    )
    return pages


def projection() -> dict:
    return {
        (row.requirement_id, row.target_id): (
            row.verdict,
            row.execution_id,
            row.evaluation_source_key,
            row.policy_version,
        )
        for row in PolicyProgress.objects.all()
    }


def expected_projection(site, satellite, resource_class, policy, gate=None) -> tuple[dict, int]:
    """The projection recomputed from scratch with plain ORM reads (an independent reference);
    returns (rows for every non-deferred target, number of targets)."""
    requirements = Requirement.objects.filter(policy=policy, retired_at__isnull=True)
    if gate:
        requirements = requirements.filter(gate=gate)
    keys = load_resolutions([(r.id, site.id) for r in requirements])
    enrolled = Device.objects.filter(enrolled_at__isnull=False).exclude(state="decommissioned")
    rows, targets = {}, 0
    for requirement in requirements:
        if requirement.scope == "single_node":
            found = [
                ("device", d.id) for d in enrolled.filter(site=site, satellite=satellite, resource_class=resource_class)
            ]
        else:
            tops = Topology.objects.filter(site=site, satellite=satellite, unit=requirement.unit)
            found = [
                ("topology", t.id)
                for t in tops
                if enrolled.filter(memberships__topology=t, resource_class=resource_class).exists()
            ]
        for kind, target in found:
            targets += 1
            latest = (
                TestExecution.objects.filter(requirement=requirement, **{f"{kind}_id": target})
                .order_by("-created_at", "-id")
                .first()
            )
            if latest is None:
                rows[(requirement.id, target)] = ("not_run", None, None, policy.version)
                continue
            if latest.status == "running":
                rows[(requirement.id, target)] = ("in_progress", latest.id, None, policy.version)
                continue
            evaluation = EvaluationResult.objects.filter(execution=latest).first()
            key = keys[(requirement.id, site.id)].key
            if (
                evaluation is None
                or evaluation.evaluation_source_key != key
                or evaluation.execution_updated_at != latest.updated_at
            ):
                continue  # deferred
            verdict = "errored" if latest.status == "errored" else ("passed" if evaluation.passed else "failed")
            if verdict == "passed" and requirement.consecutive_passes > 1:
                verdict = _consecutive(requirement, kind, target, latest, key, policy)
                if verdict is None:
                    continue  # deferred: an earlier run it needs is not evaluated yet
            rows[(requirement.id, target)] = (verdict, latest.id, key, policy.version)
    return rows, targets


def _consecutive(requirement, kind, target, latest, key, policy):
    """`consecutive_passes` recomputed independently: the latest K finished executions under the
    current version (created since it changed) must all have passed."""
    since = policy.version_changed_at
    if since is not None and latest.created_at < since:
        return "not_run"
    runs = [
        e
        for e in TestExecution.objects.filter(requirement=requirement, **{f"{kind}_id": target})
        .exclude(status="running")
        .order_by("-created_at", "-id")
        if since is None or e.created_at >= since
    ][: requirement.consecutive_passes]
    assert runs[0] == latest
    for run in runs[1:]:
        evaluation = EvaluationResult.objects.filter(execution=run).first()
        if (
            evaluation is None
            or evaluation.evaluation_source_key != key
            or evaluation.execution_updated_at != run.updated_at
        ):
            return None
        if run.status == "errored":
            return "errored"
        if not evaluation.passed:
            return "failed"
    return "passed" if len(runs) == requirement.consecutive_passes else "not_run"
