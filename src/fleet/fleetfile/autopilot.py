"""A site's `autopilot:` between the fleet file and the service: its fields as the model's, and
as the file writes them (only what differs from the defaults, `enabled` always)."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from fleet.autopilot.services import autopilot_settings_apply
from fleet.fleetfile.document import AutopilotDecl
from fleet.fleetfile.durations import duration_text
from fleet.inventory.models import Site


def autopilot_fields(decl: AutopilotDecl) -> dict[str, Any]:
    return asdict(decl)


def site_autopilot_apply(site: Site, decl: AutopilotDecl) -> bool:
    """The file's `autopilot:` of the site, written (whether anything changed)."""
    return autopilot_settings_apply(site=site, settings=autopilot_fields(decl))


def autopilot_entry(fields: dict[str, Any] | None) -> dict[str, Any] | None:
    """The file's `autopilot:` for these model fields; None when it would say nothing."""
    if fields is None:
        return None
    default = asdict(AutopilotDecl())
    entry: dict[str, Any] = {}
    for key, value in fields.items():
        if value == default[key] and key != "enabled":
            continue
        entry[key] = duration_text(value) if key in ("backoff", "renew_before") else value
    if entry == {"enabled": False}:
        return None
    return entry
