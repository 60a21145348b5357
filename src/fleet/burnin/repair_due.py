"""Failing too often sends a device to repair: when a reconcile page writes a device's target as
failed, count that target's failures since the device's last repair under the current policy
version (errors do not count: an error is not the hardware failing) and, at the policy's
`repair_after_failures`, move the device to `needs_repair` behind the circuit breaker — in the
page's transaction. The page's write counts the failures of what it stored as failed
(`reconcile.write.UPSERT`), so a page sends a statement more only when a device reaches the count
(the breaker's, then the move)."""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from datetime import datetime
from typing import NamedTuple
from uuid import UUID

from django.db import connection

from fleet.burnin.fragments import counted_failure_sql
from fleet.burnin.models import PolicyProgress
from fleet.burnin.tables import sql
from fleet.core.statements import Statement
from fleet.lifecycle.breakers import Guarded, guarded_repair_moves_apply
from fleet.lifecycle.models import Repair
from fleet.lifecycle.services import AutomaticMove
from fleet.policies.models import AcceptancePolicy
from fleet_rules import lifecycle as rules
from fleet_rules.vocabulary import BURN_IN_STATES, DeviceState, TransitionCause, Verdict


class FailureCount(NamedTuple):
    device_id: UUID
    requirement_id: UUID
    requirement_name: str
    failures: int
    repair_after_failures: int
    last_execution_id: UUID | None
    repaired_at: datetime | None


FAILURES = Statement(
    "burnin.repair_due.failures",
    sql(
        """
SELECT c.device_id, c.requirement_id, r.name AS requirement_name, n.failures, pol.repair_after_failures,
       n.last_execution_id, rp.repaired_at
FROM unnest(%(devices)s::uuid[], %(requirements)s::uuid[]) AS c(device_id, requirement_id)
JOIN {device} d ON d.id = c.device_id
JOIN {requirement} r ON r.id = c.requirement_id
JOIN {policy} pol ON pol.id = r.policy_id
CROSS JOIN LATERAL (
    SELECT max(rp.created_at) AS repaired_at FROM {repair} rp WHERE rp.device_id = c.device_id
) rp
CROSS JOIN LATERAL (
    SELECT count(*) AS failures, (array_agg(x.id ORDER BY x.created_at DESC))[1] AS last_execution_id
    FROM {execution} x JOIN {evaluation} ev ON ev.execution_id = x.id
    WHERE x.requirement_id = c.requirement_id AND x.device_id = c.device_id AND {failure}
) n
WHERE d.state = ANY(%(states)s)
ORDER BY c.device_id, c.requirement_id
""",
        policy=AcceptancePolicy._meta.db_table,
        repair=Repair._meta.db_table,
        failure=counted_failure_sql("x", "ev", "pol"),
    ),
    FailureCount,
    example=lambda: {
        "devices": [uuid.uuid4()],
        "requirements": [uuid.uuid4()],
        "states": sorted(s.value for s in BURN_IN_STATES),
    },
)


def requirements_passed(keys: set[tuple[UUID, str, str]]) -> set[tuple[UUID, str, str]]:
    """Which of (site, resource class, requirement name) some device of that site and class has
    passed (its projection row's verdict): one query. The breaker's suspect-requirement rule reads
    it (registered in `BurninConfig.ready`: the lifecycle sits below burn-in)."""
    if not keys:
        return set()
    rows = (
        PolicyProgress.objects.filter(
            site_id__in={k[0] for k in keys},
            resource_class__in={k[1] for k in keys},
            requirement__name__in={k[2] for k in keys},
            verdict=Verdict.PASSED,  # a device's target, or a rack's (a collective culprit isolation named)
        )
        .values_list("site_id", "resource_class", "requirement__name")
        .distinct()
        .order_by()
    )
    return set(rows) & keys


def repair_moves(counts: Iterable[FailureCount]) -> list[AutomaticMove]:
    """The devices one of whose targets failed too often (one move per device, its worst target)."""
    worst: dict[UUID, FailureCount] = {}
    for count in counts:
        if not rules.failed_too_often(count.failures, count.repair_after_failures):
            continue
        if count.device_id not in worst or count.failures > worst[count.device_id].failures:
            worst[count.device_id] = count
    return [
        AutomaticMove(
            c.device_id,
            DeviceState.NEEDS_REPAIR,
            TransitionCause.FAILED_TOO_OFTEN,
            f"{c.requirement_name} failed {c.failures} times "
            f"{'since its repair' if c.repaired_at else 'under the current policy version'} "
            f"(repair_after_failures {c.repair_after_failures})",
            {
                "requirement": c.requirement_name,
                "requirement_id": str(c.requirement_id),
                "execution": str(c.last_execution_id) if c.last_execution_id else None,
                "failures": c.failures,
                # the last repair the count saw: a repair after it makes the move stale (lifecycle.breakers)
                "repaired_at": c.repaired_at.isoformat() if c.repaired_at else None,
            },
        )
        for c in worst.values()
    ]


def counted_failures_judge(counts: Iterable[FailureCount]) -> Guarded:
    """Move the devices one of whose targets failed too often to repair, behind the breaker (no
    statement when none did). A reconcile page's write counts the failures of what it stored as
    failed (`reconcile.write.UPSERT`), so judging them costs it nothing more."""
    return guarded_repair_moves_apply(repair_moves(counts))


def failed_targets_moves(failed: Iterable[tuple[UUID, UUID]]) -> list[AutomaticMove]:
    """For (device, requirement) targets known to have failed (the moves a breaker held): count
    their failures again (one statement; none for none) and return the moves of those still failing
    too often since their last repair."""
    pairs = sorted(set(failed))
    if not pairs:
        return []
    with connection.cursor() as cursor:
        counts = FAILURES.rows(
            cursor,
            {
                "devices": [d for d, _ in pairs],
                "requirements": [r for _, r in pairs],
                "states": sorted(s.value for s in BURN_IN_STATES),
            },
        )
    return repair_moves(counts)
