"""Helpers for certificate tests: evaluate executions with the real evaluator (as the agent's
phase 1 does) and run whole sweeps."""

from __future__ import annotations

from fleet.burnin.evaluation_results.service import evaluation_results_upsert
from fleet.burnin.models import AcceptanceCertificate, TestExecution
from fleet.burnin.reconcile.service import reconcile_sweep
from fleet.policies.selectors import load_resolutions
from fleet_rules.evaluations import ResultItem
from fleet_rules.evaluator import evaluate


def evaluate_now(*executions: TestExecution) -> None:
    """Materialise every execution's evaluation against its requirement's current thresholds."""
    resolutions = load_resolutions({(x.requirement_id, x.site_id) for x in executions})
    items = []
    for x in executions:
        x.refresh_from_db()
        resolution = resolutions[(x.requirement_id, x.site_id)]
        payload = evaluate(status=x.status, metrics=x.metrics, rules=resolution.rules_list, error=x.error or None)
        items.append(ResultItem(x.id, payload, resolution.key, x.updated_at))
    evaluation_results_upsert(items=items, actor=None)


def sweep(satellite, resource_class: str = "gpu.h200.8x", limit: int = 500):
    return reconcile_sweep(
        site_slug=satellite.site.slug, satellite_name=satellite.name, resource_class=resource_class, limit=limit
    )


def current(device) -> AcceptanceCertificate | None:
    return AcceptanceCertificate.objects.filter(device=device, superseded_at__isnull=True).first()
