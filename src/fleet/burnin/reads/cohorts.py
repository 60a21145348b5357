"""Who blocks a rack: for a multi-node target that has not run, the cohort members that have not
passed every single-node requirement at the policy's version — the rule a rerun preview reports
as `topology_cohort_blocked` (`fleet_rules.planning.single_node_shortfall`), read in SQL through
the same fragment (`passed_at_version_sql`) so the page and the planner cannot disagree. One
query for any number of racks; the first few blockers of each, and how many there are."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import NamedTuple
from uuid import UUID, uuid4

from fleet.burnin.fragments import passed_at_version_sql
from fleet.burnin.tables import sql
from fleet.core.replica import read_connection
from fleet.core.statements import Statement
from fleet.policies.models import AcceptancePolicy
from fleet_rules.eligibility import enrolled_sql
from fleet_rules.explanations import blocker_text
from fleet_rules.vocabulary import RequirementScope, Verdict

#: Blockers named per rack; the rest are counted.
BLOCKERS_SHOWN = 3


class BlockerRow(NamedTuple):
    topology_id: UUID
    resource_class: str
    hostname: str
    requirement: str
    verdict: str
    blockers: int  # (member, requirement) pairs blocking this cohort in all


COHORT_BLOCKERS = Statement(
    "burnin.reads.cohort_blockers",
    sql(
        """
SELECT topology_id, resource_class, hostname, requirement, verdict, blockers
FROM (
    SELECT s.*, row_number() OVER w AS n, count(*) OVER (PARTITION BY s.topology_id, s.resource_class) AS blockers
    FROM (
        SELECT t.topology_id, t.resource_class, d.hostname, r.name AS requirement,
               CASE WHEN p.policy_version = pol.version THEN p.verdict ELSE {not_run} END AS verdict
        FROM unnest(%(topologies)s::uuid[], %(classes)s::text[]) AS t(topology_id, resource_class)
        JOIN {membership} m ON m.topology_id = t.topology_id
        JOIN {device} d ON d.id = m.device_id AND d.resource_class = t.resource_class
        JOIN {policy} pol ON pol.resource_class = d.resource_class
        JOIN {requirement} r ON r.policy_id = pol.id AND r.retired_at IS NULL AND r.scope = {single_node}
        LEFT JOIN {progress} p ON p.requirement_id = r.id AND p.target_id = d.id
        WHERE {enrolled} AND NOT {passed}
    ) s
    WINDOW w AS (
        PARTITION BY s.topology_id, s.resource_class
        ORDER BY CASE s.verdict WHEN {failed} THEN 0 WHEN {errored} THEN 1 ELSE 2 END, s.hostname, s.requirement
    )
) x
WHERE n <= %(shown)s
ORDER BY topology_id, resource_class, n
""",
        policy=AcceptancePolicy._meta.db_table,
        enrolled=enrolled_sql("d"),
        passed=passed_at_version_sql("p", "pol.version"),
        not_run=f"'{Verdict.NOT_RUN.value}'",
        failed=f"'{Verdict.FAILED.value}'",
        errored=f"'{Verdict.ERRORED.value}'",
        single_node=f"'{RequirementScope.SINGLE_NODE.value}'",
    ),
    BlockerRow,
    example=lambda: {"topologies": [uuid4()], "classes": ["gpu.h200.8x"], "shown": BLOCKERS_SHOWN},
)


@dataclass(frozen=True)
class Blocked:
    """Why a cohort's collective cannot run: its first blockers in words, and how many more."""

    named: tuple[str, ...]  # "a03-n04 failed nccl-in-node"
    more: int

    @property
    def text(self) -> str:
        """`blocked: a03-n04 failed nccl-in-node; a03-n02 has not run gpu-diag (and 2 more)`."""
        tail = f" (and {self.more} more)" if self.more else ""
        return "blocked: " + "; ".join(self.named) + tail


def cohort_blockers(cohorts: Iterable[tuple[UUID, str]]) -> dict[tuple[UUID, str], Blocked]:
    """(topology, resource class) → who blocks that cohort, for those some member blocks. One
    query, asked even for no cohort, so a page's query count does not depend on its racks."""
    wanted = sorted(set(cohorts), key=lambda c: (c[0].int, c[1]))
    params = {"topologies": [t for t, _ in wanted], "classes": [rc for _, rc in wanted], "shown": BLOCKERS_SHOWN}
    with read_connection().cursor() as cursor:
        rows = COHORT_BLOCKERS.rows(cursor, params)
    named: dict[tuple[UUID, str], list[str]] = {}
    totals: dict[tuple[UUID, str], int] = {}
    for row in rows:
        key = (row.topology_id, row.resource_class)
        named.setdefault(key, []).append(blocker_text(row.hostname, row.requirement, row.verdict))
        totals[key] = row.blockers
    return {key: Blocked(tuple(texts), totals[key] - len(texts)) for key, texts in named.items()}
