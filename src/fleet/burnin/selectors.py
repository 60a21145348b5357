"""Reads of the projection for people and the dashboard."""

from __future__ import annotations

from collections import defaultdict
from typing import Any
from uuid import UUID

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
