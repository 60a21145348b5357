"""The autopilot's loop: one leader at a time across every process (`fleet.core.locks.LeaderLock`,
a PostgreSQL advisory lock; the others wait and try again each interval), a pass over every
enabled site each `interval` seconds or as soon as a writer's NOTIFY says something changed (the
triggers of migration 0002: a job, a target's verdict, a repair, a breaker, the settings). A pass
that fails with an unexpected error is logged (`defect`) and the loop goes on with the next site."""

from __future__ import annotations

import logging
import os
import socket
import time
from collections.abc import Callable

from django.db import close_old_connections, connection

from fleet.autopilot.models import SiteAutopilot
from fleet.autopilot.services import autopilot_pass, defect_record
from fleet.core.locks import LeaderLock
from fleet.inventory.models import Site

log = logging.getLogger("fleet.autopilot")

LEADER_KEY = "fleet.autopilot.leader"
#: What the triggers NOTIFY (migration 0002).
CHANNEL = "fleet_autopilot"
#: Passes closer together than this are merged: a burst of NOTIFYs (a page of reports) costs one.
MIN_GAP_S = 0.5


def leader_name() -> str:
    return f"autopilot@{socket.gethostname()}:{os.getpid()}"


def run(*, interval: float, should_stop: Callable[[], bool], on_pass: Callable[[], None] | None = None) -> None:
    """Until `should_stop()`: lead when possible, pass over every enabled site, wait."""
    actor = leader_name()
    lock = LeaderLock(LEADER_KEY, channel=CHANNEL)
    leading = False
    try:
        while not should_stop():
            if not lock.acquire():
                if leading:
                    log.warning("%s lost the autopilot's leadership", actor)
                leading = False
                time.sleep(min(interval, 1.0))
                continue
            if not leading:
                log.info("%s leads the autopilot", actor)
                leading = True
            started = time.monotonic()
            passes_once(actor)
            if on_pass is not None:
                on_pass()
            lock.wait(max(MIN_GAP_S, interval - (time.monotonic() - started)))
            time.sleep(MIN_GAP_S)
    finally:
        lock.release()


def passes_once(actor: str) -> None:
    """One pass over every enabled, unpaused site; a defect in one is logged and the rest go on."""
    _fresh_connection()
    sites = list(
        Site.objects.filter(
            id__in=SiteAutopilot.objects.filter(enabled=True, paused_at__isnull=True).values("site_id")
        ).order_by("slug")
    )
    for site in sites:
        try:
            autopilot_pass(site=site, actor=actor)
        except Exception as exc:  # the loop outlives a defect in one pass: said, not silent
            log.exception("%s: autopilot pass failed", site.slug)
            _fresh_connection()
            try:
                defect_record(site=site, actor=actor, error=exc)
            except Exception:  # the database itself is away: the next pass tries again
                log.exception("%s: the defect could not be recorded", site.slug)


def _fresh_connection() -> None:
    """Drop a broken or old connection between passes (never inside a caller's transaction)."""
    if not connection.in_atomic_block:
        close_old_connections()
