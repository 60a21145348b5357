"""Acceptance, the one rule of the dashboard's reads that is not a count of rows: a device is
**accepted** when every non-retired requirement of its policy — every gate, multi-node ones
through the device's topology of that unit — has a `passed` projection row at the policy's
current version: `fleet_rules.certificates.rows_all_passed`, whose SQL form
(`fleet.burnin.fragments.acceptable_sql`) `ACCEPTANCE` counts; the overview, the site page and the
device page all read it."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple
from uuid import UUID, uuid4

from fleet.burnin.fragments import acceptable_sql
from fleet.burnin.tables import sql
from fleet.core.replica import read_connection
from fleet.core.statements import Statement
from fleet.policies.models import AcceptancePolicy
from fleet_rules.eligibility import enrolled_sql


class AcceptanceRow(NamedTuple):
    site_id: UUID
    resource_class: str
    enrolled: int
    accepted: int


#: Per (site, resource class): enrolled devices, and those acceptable by their rows
#: (`fleet.burnin.fragments.acceptable_sql`, the rule the certificate pre-filter reads too).
ACCEPTANCE = Statement(
    "burnin.reads.acceptance",
    sql(
        """
SELECT d.site_id, d.resource_class, count(*) AS enrolled, count(*) FILTER (WHERE {acceptable}) AS accepted
FROM {device} d
LEFT JOIN {policy} pol ON pol.resource_class = d.resource_class
WHERE d.site_id = ANY(%(sites)s) AND (%(device)s::uuid IS NULL OR d.id = %(device)s) AND {enrolled}
GROUP BY d.site_id, d.resource_class
""",
        policy=AcceptancePolicy._meta.db_table,
        enrolled=enrolled_sql("d"),
        acceptable=acceptable_sql("d", "pol.id", "pol.version"),
    ),
    AcceptanceRow,
    example=lambda: {"sites": [uuid4()], "device": None},
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
    params = {"sites": list(site_ids), "device": device_id}
    with read_connection().cursor() as cursor:
        rows = ACCEPTANCE.rows(cursor, params)
    return {(row.site_id, row.resource_class): Acceptance(row.enrolled, row.accepted) for row in rows}
