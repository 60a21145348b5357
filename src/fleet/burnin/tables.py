"""The table names the burn-in SQL is written against, from the models (never spelled twice)."""

from __future__ import annotations

from fleet.burnin.models import (
    EvaluationResult,
    PendingEvaluation,
    PendingEvaluationKey,
    PolicyProgress,
    ReconcileSweep,
    TestExecution,
)
from fleet.inventory.models import Device, Topology, TopologyMembership
from fleet.policies.models import Requirement

#: For `str.format` of SQL templates: `{execution}`, `{device}`, …
TABLES = {
    "device": Device._meta.db_table,
    "topology": Topology._meta.db_table,
    "membership": TopologyMembership._meta.db_table,
    "requirement": Requirement._meta.db_table,
    "execution": TestExecution._meta.db_table,
    "evaluation": EvaluationResult._meta.db_table,
    "progress": PolicyProgress._meta.db_table,
    "sweep": ReconcileSweep._meta.db_table,
    "pending": PendingEvaluation._meta.db_table,
    "pending_key": PendingEvaluationKey._meta.db_table,
}


def sql(template: str, **fragments: str) -> str:
    """A SQL template with the table names (and any named fragments) filled in. Only constants
    of the code go in here; every value travels as a bound parameter."""
    return template.format(**TABLES, **fragments)
