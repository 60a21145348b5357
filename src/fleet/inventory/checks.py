"""System checks of inventory's data: `fleet check --database default` (and `fleet migrate`, which
runs the database checks first) reports device hostnames that break the hostname rule, so an
operator renames them before migration inventory.0004 refuses to run."""

from __future__ import annotations

from typing import Any

from django.core.checks import CheckMessage, Error
from django.db import DatabaseError, transaction

from fleet.inventory.hostnames import HOSTNAME_PATTERN, HOSTNAME_RULE, MAX_HOSTNAME_LENGTH

SHOWN = 50


def offending_hostnames(limit: int = SHOWN) -> tuple[int, list[str]]:
    """How many devices break the hostname rule, and the first `limit` as `site/hostname`."""
    from fleet.inventory.models import Device

    offending = Device.objects.exclude(hostname__regex=HOSTNAME_PATTERN).order_by("site__slug", "hostname")
    names = [
        f"{slug}/{hostname.encode('unicode_escape').decode('ascii')[:80]}"
        for slug, hostname in offending.values_list("site__slug", "hostname")[:limit]
    ]
    return offending.count() if names else 0, names


def check_hostnames(app_configs: Any = None, databases: Any = None, **kwargs: Any) -> list[CheckMessage]:
    if not databases or "default" not in databases:
        return []
    try:
        with transaction.atomic():  # a missing table must not poison an open transaction
            count, names = offending_hostnames()
    except DatabaseError:
        return []  # not migrated yet: nothing to report
    if not count:
        return []
    more = f" (and {count - len(names)} more)" if count > len(names) else ""
    return [
        Error(
            f"{count} device hostname(s) break the hostname rule ({HOSTNAME_RULE}, at most "
            f"{MAX_HOSTNAME_LENGTH} characters): {', '.join(names)}{more}",
            hint="Rename them (the fleet file, the admin or SQL); migration inventory.0004 refuses to run until then.",
            id="inventory.E001",
        )
    ]
