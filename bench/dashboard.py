"""The dashboard's pages at the benchmark fleet's size (5,000 devices at scale 1): the site page,
the grid and the failures list, rendered in-process through Django's test client as a signed-in
operator (an admin), with the projection the reconcile sweeps left. Median of the runs; the
query count of each page must not depend on the fleet (the dashboard's own tests hold that)."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from django.contrib.auth import get_user_model
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from bench.seed import Fleet

PAGES = ("site", "grid", "failures")


@dataclass
class DashboardRow:
    page: str
    path: str
    seconds: list[float] = field(default_factory=list)
    queries: int = 0
    bytes: int = 0
    problems: list[str] = field(default_factory=list)

    @property
    def median_ms(self) -> float:
        ordered = sorted(self.seconds)
        return ordered[len(ordered) // 2] * 1000


def dashboard_measure(fleet: Fleet, *, runs: int, progress: Callable[[str], None]) -> list[DashboardRow]:
    user = get_user_model().objects.create_superuser("bench-operator", "bench@example.invalid", "not-used-here")
    client = Client()
    client.force_login(user)
    slug = fleet.site.slug
    paths = {"site": f"/sites/{slug}/", "grid": f"/sites/{slug}/grid/", "failures": f"/sites/{slug}/failures/"}
    rows = []
    for page in PAGES:
        progress(f"dashboard: {page} page, {len(fleet.device_ids):,} devices")
        row = DashboardRow(page, paths[page])
        client.get(row.path)  # warm: templates compiled, caches filled
        for _ in range(max(3, runs)):
            with CaptureQueriesContext(connection) as queries:
                began = time.perf_counter()
                response = client.get(row.path)
                row.seconds.append(time.perf_counter() - began)
            row.queries = len(queries)
            row.bytes = len(response.content)
            if response.status_code != 200:
                row.problems.append(f"dashboard {page}: status {response.status_code}")
                break
        rows.append(row)
    return rows
