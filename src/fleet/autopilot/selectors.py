"""The autopilot's reads for pages and the API."""

from __future__ import annotations

from django.db.models import QuerySet

from fleet.autopilot.models import AutopilotAction, SiteAutopilot
from fleet.inventory.models import Site
from fleet.jobs.models import JobDevice


def site_log(site: Site) -> QuerySet[AutopilotAction]:
    """The site's log, newest first."""
    return AutopilotAction.objects.filter(site=site).order_by("-at", "-id")


def site_autopilot(site: Site) -> SiteAutopilot | None:
    return SiteAutopilot.objects.filter(site=site).first()


def under_test_count(site: Site) -> int:
    """Devices of the site holding an active job (one statement)."""
    return JobDevice.objects.filter(active=True, device__site=site).count()
