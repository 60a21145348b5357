"""`evaluation_results_upsert`: load → classify each item → write, in one transaction."""

from __future__ import annotations

from django.db import transaction

from fleet.burnin import metrics
from fleet.burnin.evaluation_results.load import load_facts
from fleet.burnin.evaluation_results.write import write_results
from fleet.core.heap import collector_paused
from fleet.inventory.identity import Actor
from fleet_rules.evaluations import ResultItem, UpsertCounts, classify
from fleet_rules.vocabulary import EvaluationOutcome


@collector_paused()  # up to EVALUATION_RESULTS_MAX_ITEMS items (fleet.core.heap)
@transaction.atomic
def evaluation_results_upsert(*, items: list[ResultItem], actor: Actor) -> UpsertCounts:
    facts, stored = load_facts((item.execution_id for item in items), actor)
    counts = UpsertCounts()
    to_write = []
    for item in items:
        outcome = classify(item, facts.get(item.execution_id), stored.get(item.execution_id))
        if outcome is EvaluationOutcome.WRITTEN:
            to_write.append(item)
        else:
            counts.add(outcome)
    written = write_results(to_write)
    counts.add(EvaluationOutcome.WRITTEN, len(written))
    # Lost to a concurrent write for a newer execution_updated_at: this result is already stale.
    counts.add(EvaluationOutcome.STALE, len(to_write) - len(written))
    metrics.evaluation_results_counted(counts)
    return counts
