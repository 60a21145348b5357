"""What applying a fleet file did, kind by kind (the summary `fleet apply` prints)."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

KINDS: tuple[str, ...] = ("sites", "satellites", "topologies", "devices", "policies", "requirements", "thresholds")
KINDS += ("parameter_profiles", "subscriptions")


class Change(StrEnum):
    """What applying a file did to one declared thing (the summary's columns)."""

    CREATED = "created"
    UPDATED = "updated"
    UNCHANGED = "unchanged"
    REMOVED = "removed"


@dataclass
class KindCounts:
    created: int = 0
    updated: int = 0
    unchanged: int = 0
    removed: int = 0


@dataclass
class ApplySummary:
    dry_run: bool = False
    counts: dict[str, KindCounts] = field(default_factory=lambda: {k: KindCounts() for k in KINDS})
    policy_versions: dict[str, tuple[int | None, int]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    @property
    def changed(self) -> bool:
        return any(c.created or c.updated or c.removed for c in self.counts.values())

    def as_dict(self) -> dict[str, Any]:
        return {
            "dry_run": self.dry_run,
            "counts": {k: vars(v) for k, v in self.counts.items()},
            "policy_versions": {rc: {"from": old, "to": new} for rc, (old, new) in self.policy_versions.items()},
            "notes": self.notes,
        }
