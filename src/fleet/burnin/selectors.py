"""Reads of the projection for people and the dashboard."""

from __future__ import annotations

from collections import defaultdict
from typing import Any
from uuid import UUID

from django.db import connection
from django.db.models import Count

from fleet.burnin.models import PolicyProgress, Verdict


def progress_summary(*, site_id: UUID) -> list[dict[str, Any]]:
    """Counts per resource class × requirement × verdict at a site (one query)."""
    rows: dict[tuple[str, str, str], dict[str, Any]] = defaultdict(lambda: dict.fromkeys(Verdict.values, 0))
    counts = (
        PolicyProgress.objects.filter(site_id=site_id)
        .values("resource_class", "requirement__name", "gate", "verdict")
        .annotate(n=Count("id"))
        .order_by()
    )
    for entry in counts:
        rows[(entry["resource_class"], entry["requirement__name"], entry["gate"])][entry["verdict"]] = entry["n"]
    return [
        {"resource_class": rc, "requirement": name, "gate": gate, **verdicts, "total": sum(verdicts.values())}
        for (rc, name, gate), verdicts in sorted(rows.items())
    ]


_LATEST = """
SELECT t.requirement_id, t.target_id, x.id
FROM unnest(%s::uuid[], %s::uuid[], %s::boolean[]) AS t(requirement_id, target_id, is_device)
CROSS JOIN LATERAL (
    (SELECT e.id FROM burnin_testexecution e
     WHERE t.is_device AND e.requirement_id = t.requirement_id AND e.device_id = t.target_id
     ORDER BY e.created_at DESC, e.id DESC LIMIT 1)
    UNION ALL
    (SELECT e.id FROM burnin_testexecution e
     WHERE NOT t.is_device AND e.requirement_id = t.requirement_id AND e.topology_id = t.target_id
     ORDER BY e.created_at DESC, e.id DESC LIMIT 1)
) x
"""


def latest_execution_ids(pairs: list[tuple[UUID, UUID, bool]]) -> dict[tuple[UUID, UUID], UUID]:
    """The latest execution of each (requirement, target, target is a device) in one query, each
    found through the "latest execution of a target" index: work grows with the pairs asked
    about, not with history."""
    if not pairs:
        return {}
    with connection.cursor() as cursor:
        cursor.execute(_LATEST, [[p[0] for p in pairs], [p[1] for p in pairs], [p[2] for p in pairs]])
        return {(requirement, target): execution for requirement, target, execution in cursor.fetchall()}
