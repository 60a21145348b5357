"""Acceptance, as the overview, the site page and the device page count it: a device is
**accepted** when it holds a valid acceptance certificate (current, not past its `valid_until`:
`fleet.burnin.certificates.reads.valid_now`, the rule the certificate API and the lifecycle gate
read). A certificate exists exactly when its evidence is committed: the reconcile page that writes
a device's last pass issues it, and the page that writes a newer failure supersedes it, in the same
transaction (`fleet.burnin.certificates.issuance`, rule `fleet_rules.certificates.is_certifiable`).
So the count is a range of the current-certificate index, not a probe of every device's rows."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple
from uuid import UUID, uuid4

from django.utils import timezone

from fleet.burnin.certificates.reads import valid_certificates_sql
from fleet.burnin.tables import sql
from fleet.core.replica import read_connection
from fleet.core.statements import Statement
from fleet_rules.eligibility import enrolled_sql


class AcceptanceRow(NamedTuple):
    site_id: UUID
    resource_class: str
    enrolled: int
    accepted: int


#: Per (site, resource class): enrolled devices, and those of them holding a valid certificate
#: (read through the partial index of current certificates by site and class).
ACCEPTANCE = Statement(
    "burnin.reads.acceptance",
    sql(
        """
SELECT d.site_id, d.resource_class, count(*) AS enrolled, count(c.device_id) AS accepted
FROM {device} d
LEFT JOIN {valid} c ON c.device_id = d.id
WHERE d.site_id = ANY(%(sites)s) AND (%(device)s::uuid IS NULL OR d.id = %(device)s) AND {enrolled}
GROUP BY d.site_id, d.resource_class
""",
        valid=valid_certificates_sql("%(sites)s"),
        enrolled=enrolled_sql("d"),
    ),
    AcceptanceRow,
    example=lambda: {"sites": [uuid4()], "device": None, "now": timezone.now()},
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
    params = {"sites": list(site_ids), "device": device_id, "now": timezone.now()}
    with read_connection().cursor() as cursor:
        rows = ACCEPTANCE.rows(cursor, params)
    return {(row.site_id, row.resource_class): Acceptance(row.enrolled, row.accepted) for row in rows}
