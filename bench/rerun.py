"""Rerun planning: preview and dispatch for growing selections of devices, over the projection
the reconcile sweeps left behind. The time may grow with the selection (more devices to plan,
more jobs to insert); the number of queries must not.

Each dispatch run's jobs are deleted afterwards (untimed), so every run plans the same state.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from uuid import UUID

from django.conf import settings

from bench.seed import Fleet
from bench.timing import QueryLog, Timing, timed
from fleet.burnin.reruns.service import DispatchOutcome, rerun_dispatch, rerun_plan_preview
from fleet.inventory.models import Device, Site
from fleet.jobs.models import Job, JobDevice
from fleet_rules.vocabulary import PlanningMode

SELECTIONS = (10, 1000, 2000)


@dataclass
class RerunRow:
    devices: int
    preview: Timing
    dispatch: Timing
    preview_queries: str = ""
    dispatch_queries: str = ""
    dispatch_queries_counts: list[int] = field(default_factory=list)
    jobs: int = 0
    skipped_devices: int = 0
    skip_groups: int = 0
    problems: list[str] = field(default_factory=list)


def _jobs_delete() -> None:
    """Undo a dispatch: its jobs and their device leases."""
    JobDevice.objects.all().delete()
    Job.objects.all().delete()


def _measure_selection(site: Site, selected: list[UUID], runs: int) -> RerunRow:
    previews, dispatches = QueryLog(), QueryLog()
    planned: list[DispatchOutcome] = []
    dispatched: list[DispatchOutcome] = []

    def preview() -> None:
        planned.append(
            previews.call(partial(rerun_plan_preview, site=site, device_ids=selected, mode=PlanningMode.NON_PASSING))
        )

    def dispatch() -> None:
        dispatched.append(
            dispatches.call(
                partial(
                    rerun_dispatch,
                    site=site,
                    device_ids=selected,
                    mode=PlanningMode.NON_PASSING,
                    requested_by="bench",
                )
            )
        )

    row = RerunRow(len(selected), timed(preview, runs=runs), timed(dispatch, runs=runs, before=_jobs_delete))
    _jobs_delete()
    row.preview_queries, row.dispatch_queries = previews.spread(), dispatches.spread()
    row.dispatch_queries_counts = list(dispatches.counts)
    outcome = dispatched[-1]
    row.jobs = len(outcome.created_jobs)
    row.skipped_devices = len({d for group in outcome.plan.skips for d in group.device_ids})
    row.skip_groups = len(outcome.plan.skips)
    if {len(p.plan.jobs) for p in planned} | {len(d.created_jobs) for d in dispatched} != {row.jobs}:
        row.problems.append(
            f"rerun {row.devices} devices: previews planned {[len(p.plan.jobs) for p in planned]} jobs, "
            f"dispatches created {[len(d.created_jobs) for d in dispatched]}"
        )
    return row


def rerun_measure(fleet: Fleet, *, scale: float, runs: int, progress: Callable[[str], None]) -> list[RerunRow]:
    rng = random.Random(3)
    # The largest selection grows with --scale, up to what one request may select.
    cap = min(len(fleet.device_ids), settings.FLEET["RERUN_MAX_DEVICES"])
    sizes = sorted({min(cap, n) for n in (*SELECTIONS[:-1], int(SELECTIONS[-1] * scale))})
    rows = []
    for size in sizes:
        progress(f"rerun, {size} devices")
        rows.append(_measure_selection(fleet.site, rng.sample(fleet.device_ids, size), runs))
    return rows


def rerun_at_scale(site_slug: str, *, size: int, runs: int, progress: Callable[[str], None]) -> RerunRow | None:
    """Preview and dispatch of `size` devices of a fleet-scale site (its projection swept), or
    None when that site has fewer devices."""
    site = Site.objects.filter(slug=site_slug).first()
    if site is None:
        return None
    ids = list(Device.objects.filter(site=site).order_by("id").values_list("id", flat=True))
    if len(ids) < size:
        return None
    progress(f"rerun, {size:,} devices of site {site_slug}")
    return _measure_selection(site, random.Random(5).sample(ids, size), runs)
