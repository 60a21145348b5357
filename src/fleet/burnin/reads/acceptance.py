"""Acceptance, the one rule of the dashboard's reads that is not a count of rows: a device is
**accepted** when every non-retired requirement of its policy — every gate, multi-node ones
through the device's topology of that unit — has a `passed` projection row at the policy's
current version. `ACCEPTANCE` is its only definition; the overview, the site page and the device
page all read it."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple
from uuid import UUID, uuid4

from fleet.burnin.tables import sql
from fleet.core.replica import read_connection
from fleet.core.statements import Statement
from fleet.policies.models import AcceptancePolicy
from fleet_rules.eligibility import enrolled_sql
from fleet_rules.vocabulary import RequirementScope, Verdict


class AcceptanceRow(NamedTuple):
    site_id: UUID
    resource_class: str
    enrolled: int
    accepted: int


ACCEPTANCE = Statement(
    "burnin.reads.acceptance",
    sql(
        """
WITH required AS (
    SELECT p.resource_class, p.version, r.id, r.scope, r.unit
    FROM {requirement} r JOIN {policy} p ON p.id = r.policy_id
    WHERE r.retired_at IS NULL
), devices AS (
    SELECT d.id, d.site_id, d.resource_class FROM {device} d
    WHERE d.site_id = ANY(%(sites)s) AND (%(device)s::uuid IS NULL OR d.id = %(device)s) AND {enrolled}
), judged AS (
    SELECT devices.id, devices.site_id, devices.resource_class,
           count(required.id) AS required,
           count(pp.id) FILTER (WHERE pp.verdict = %(passed)s AND pp.policy_version = required.version) AS passed
    FROM devices
    LEFT JOIN required ON required.resource_class = devices.resource_class
    LEFT JOIN {membership} m
           ON required.scope = %(multi_node)s AND m.device_id = devices.id AND m.unit = required.unit
    LEFT JOIN {progress} pp
           ON pp.requirement_id = required.id
          AND pp.target_id = CASE WHEN required.scope = %(multi_node)s THEN m.topology_id ELSE devices.id END
    GROUP BY devices.id, devices.site_id, devices.resource_class
)
SELECT site_id, resource_class, count(*) AS enrolled,
       count(*) FILTER (WHERE required > 0 AND passed = required) AS accepted
FROM judged GROUP BY site_id, resource_class
""",
        policy=AcceptancePolicy._meta.db_table,
        enrolled=enrolled_sql("d"),
    ),
    AcceptanceRow,
    example=lambda: {
        "sites": [uuid4()],
        "device": None,
        "passed": Verdict.PASSED,
        "multi_node": RequirementScope.MULTI_NODE,
    },
)


@dataclass(frozen=True)
class Acceptance:
    enrolled: int = 0
    accepted: int = 0

    @property
    def share(self) -> float:
        return self.accepted / self.enrolled if self.enrolled else 0.0

    def __add__(self, other: Acceptance) -> Acceptance:
        return Acceptance(self.enrolled + other.enrolled, self.accepted + other.accepted)


def acceptance(site_ids: Sequence[UUID], device_id: UUID | None = None) -> dict[tuple[UUID, str], Acceptance]:
    """(site, resource class) → enrolled devices and how many of them are accepted (one query)."""
    if not site_ids:
        return {}
    params = {
        "sites": list(site_ids),
        "device": device_id,
        "passed": Verdict.PASSED,
        "multi_node": RequirementScope.MULTI_NODE,
    }
    with read_connection().cursor() as cursor:
        rows = ACCEPTANCE.rows(cursor, params)
    return {(row.site_id, row.resource_class): Acceptance(row.enrolled, row.accepted) for row in rows}
