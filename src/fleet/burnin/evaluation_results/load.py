"""What classifying posted results needs, in a constant number of queries."""

from __future__ import annotations

from collections.abc import Iterable
from uuid import UUID

from fleet.burnin.models import TestExecution
from fleet.inventory.identity import Actor, site_restriction
from fleet.policies.selectors import load_resolutions
from fleet_rules.evaluations import ExecutionFacts, StoredResult


def load_facts(
    execution_ids: Iterable[UUID], actor: Actor
) -> tuple[dict[UUID, ExecutionFacts], dict[UUID, StoredResult]]:
    """The executions named (with what the caller may see of them) and their stored results."""
    executions = list(
        TestExecution.objects.filter(id__in=list(execution_ids))
        .select_related("evaluation")
        .only(
            "id",
            "status",
            "updated_at",
            "site_id",
            "requirement_id",
            "evaluation__passed",
            "evaluation__reason",
            "evaluation__metric_evaluations",
            "evaluation__evaluation_source_key",
            "evaluation__execution_updated_at",
        )
    )
    resolutions = load_resolutions({(e.requirement_id, e.site_id) for e in executions})
    restricted = site_restriction(actor)
    facts, stored = {}, {}
    for e in executions:
        facts[e.id] = ExecutionFacts(
            status=e.status,
            updated_at=e.updated_at,
            within_caller_site=restricted is None or restricted == e.site_id,
            current_key=resolutions[(e.requirement_id, e.site_id)].key,
        )
        evaluation = getattr(e, "evaluation", None)
        if evaluation is not None:
            stored[e.id] = StoredResult(
                payload={
                    "passed": evaluation.passed,
                    "reason": evaluation.reason,
                    "metric_evaluations": evaluation.metric_evaluations,
                },
                source_key=evaluation.evaluation_source_key,
                execution_updated_at=evaluation.execution_updated_at,
            )
    return facts, stored
