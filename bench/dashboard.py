"""The dashboard's pages, rendered in-process through Django's test client as a signed-in operator
(an admin): the server's time, no network and no browser.

`dashboard_measure`: the site page, the grid and the failures list of the benchmark fleet (5,000
devices at scale 1), with the projection the reconcile sweeps left.

`dashboard_scale_measure` (part `dashboard100k`): sites of 1,000 and 100,000 devices, each one
satellite's scope bulk-loaded by `bench.scale.scope_build` (racks of eight, the benchmark policy,
executions and evaluations), its projection filled by the verdict rules in one statement
(`projection_fill`, what a complete reconcile sweep leaves) and its acceptable devices certified by
the service's own `certificates_refresh`, and 2 % of its devices sent to repair; then `/`, the
site page, the grid's and the failures list's first pages, a failing device's page and the repair
queue. Median of the runs; the query count of each page
must be the same at both sizes (the dashboard's own tests hold that too)."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from django.contrib.auth import get_user_model
from django.db import connection, transaction
from django.test import Client
from django.test.utils import CaptureQueriesContext

from bench.scale import projection_fill, scope_build
from bench.seed import Fleet
from fleet.burnin.certificates.issuance import certificates_refresh
from fleet.burnin.fragments import acceptable_sql
from fleet.burnin.models import PolicyProgress
from fleet.burnin.tables import sql
from fleet.inventory.models import Site
from fleet.lifecycle.services import AutomaticMove, automatic_moves_apply
from fleet_rules.vocabulary import DeviceState, TransitionCause, Verdict

PAGES = ("site", "grid", "failures")

#: The sizes of `dashboard_scale_measure`, in devices; the pages it times.
SCALE_SIZES = (1_000, 100_000)
SCALE_PAGES = ("overview", "site", "grid", "failures", "device", "repairs")
#: The share of a site's devices the bulk load sends to repair (those with a failed row, by
#: hostname), each with the history entry the lifecycle writes: the repair queue's page.
REPAIR_SHARE = 0.02


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


def _client() -> Client:
    user_model = get_user_model()
    user = user_model.objects.filter(username="bench-operator").first() or user_model.objects.create_superuser(
        "bench-operator", "bench@example.invalid", "not-used-here"
    )
    client = Client()
    client.force_login(user)
    return client


def _time(client: Client, row: DashboardRow, runs: int) -> DashboardRow:
    client.get(row.path)  # warm: templates compiled, caches filled
    for _ in range(max(3, runs)):
        with CaptureQueriesContext(connection) as queries:
            began = time.perf_counter()
            response = client.get(row.path)
            row.seconds.append(time.perf_counter() - began)
        row.queries = len(queries)
        row.bytes = len(response.content)
        if response.status_code != 200:
            row.problems.append(f"dashboard {row.page} ({row.path}): status {response.status_code}")
            break
    return row


def dashboard_measure(fleet: Fleet, *, runs: int, progress: Callable[[str], None]) -> list[DashboardRow]:
    client = _client()
    slug = fleet.site.slug
    paths = {"site": f"/sites/{slug}/", "grid": f"/sites/{slug}/grid/", "failures": f"/sites/{slug}/failures/"}
    rows = []
    for page in PAGES:
        progress(f"dashboard: {page} page, {len(fleet.device_ids):,} devices")
        rows.append(_time(client, DashboardRow(page, paths[page]), runs))
    return rows


@dataclass
class DashboardScale:
    """The pages of one bulk-loaded site of `devices` devices."""

    devices: int
    targets: int
    seed_seconds: float  # inventory, executions, evaluations, the projection and a VACUUM ANALYZE
    certify_seconds: float  # the service issuing the acceptable devices' certificates
    certified: int
    pages: list[DashboardRow]

    @property
    def problems(self) -> list[str]:
        return [p for row in self.pages for p in row.problems]


def dashboard_site_build(fleet: Fleet, devices: int) -> tuple[Site, float, float, int]:
    """A site of `devices` devices with its projection and certificates: the site, the seconds the
    bulk load and the certification took, and how many certificates were issued."""
    began = time.perf_counter()
    site = Site.objects.create(slug=f"dash-{devices}", name=f"Dashboard {devices:,} devices")
    satellite, _ = scope_build(fleet, 0, site=site, name=f"dash-{devices}", devices=devices)
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")  # the fill's plan needs the loaded tables' statistics
    projection_fill(fleet, satellite)  # analyses the projection
    seeded = time.perf_counter() - began
    began = time.perf_counter()
    with connection.cursor() as cursor:
        cursor.execute(_ACCEPTABLE_DEVICES, [site.id])
        acceptable = [row[0] for row in cursor.fetchall()]
    issued = 0
    for start in range(0, len(acceptable), CERTIFY_BATCH):
        with transaction.atomic():
            issued += certificates_refresh(device_ids=acceptable[start : start + CERTIFY_BATCH], topology_ids=()).issued
    certified = time.perf_counter() - began
    began = time.perf_counter()
    _to_repair(site, devices)
    with connection.cursor() as cursor:
        # What autovacuum does to a table some time after a bulk load: hint bits and the visibility map
        # set (index-only scans possible), so a page's first reads do not write the whole load back.
        cursor.execute("VACUUM ANALYZE")
    return site, seeded + time.perf_counter() - began, certified, issued


CERTIFY_BATCH = 2_000
#: Devices with a failed row (by hostname), with that row's requirement and execution: the ones
#: the bulk load sends to repair, as the lifecycle sends a device that failed too often.
_TO_REPAIR = """
SELECT d.id, p.requirement_id, r.name, p.execution_id FROM inventory_device d
CROSS JOIN LATERAL (
    SELECT p.requirement_id, p.execution_id FROM burnin_policyprogress p
    WHERE p.device_id = d.id AND p.verdict = 'failed' LIMIT 1
) p
JOIN policies_requirement r ON r.id = p.requirement_id
WHERE d.site_id = %(site)s ORDER BY d.hostname LIMIT %(n)s
"""


def _to_repair(site: Site, devices: int) -> None:
    """Move `REPAIR_SHARE` of the site's devices with a failed row to `needs_repair` through the
    lifecycle's own writer of automatic moves (one statement: states and history)."""
    with connection.cursor() as cursor:
        cursor.execute(_TO_REPAIR, {"site": site.id, "n": max(1, int(devices * REPAIR_SHARE))})
        chosen = cursor.fetchall()
    automatic_moves_apply(
        [
            AutomaticMove(
                device_id,
                DeviceState.NEEDS_REPAIR,
                TransitionCause.FAILED_TOO_OFTEN,
                f"{name} failed 3 times under the current policy version (repair_after_failures 3)",
                {
                    "requirement": name,
                    "requirement_id": str(requirement_id),
                    "failures": 3,
                    "execution": str(execution),
                },
            )
            for device_id, requirement_id, name, execution in chosen
        ]
    )


#: The site's devices whose rows all pass: the ones the reconcile's certificate refresh would certify.
_ACCEPTABLE_DEVICES = sql(
    "SELECT d.id FROM {device} d JOIN {policy} pol ON pol.resource_class = d.resource_class "
    "WHERE d.site_id = %s AND {acceptable}",
    policy="policies_acceptancepolicy",
    acceptable=acceptable_sql("d", "pol.id", "pol.version"),
)


def _device_path(site: Site) -> str:
    """A device with a failed row: the device page at its fullest (failures, attempts, rack)."""
    hostname = (
        PolicyProgress.objects.filter(site=site, verdict=Verdict.FAILED, device__isnull=False)
        .order_by("target_id")
        .values_list("device__hostname", flat=True)
        .first()
    )
    return f"/sites/{site.slug}/devices/{hostname}/"


def dashboard_scale_measure(
    fleet: Fleet, *, sizes: tuple[int, ...] = SCALE_SIZES, runs: int, progress: Callable[[str], None]
) -> list[DashboardScale]:
    """Smallest first, every site kept: the overview at the largest size counts every site."""
    client = _client()
    results = []
    for devices in sorted(sizes):
        progress(f"dashboard100k: seeding a site of {devices:,} devices (bulk)")
        site, seeded, certify, issued = dashboard_site_build(fleet, devices)
        progress(f"dashboard100k: seeded in {seeded:.1f} s, {issued:,} certificates in {certify:.1f} s")
        slug = site.slug
        paths = {
            "overview": "/",
            "site": f"/sites/{slug}/",
            "grid": f"/sites/{slug}/grid/",
            "failures": f"/sites/{slug}/failures/",
            "device": _device_path(site),
            "repairs": f"/sites/{slug}/repairs/",
        }
        rows = []
        for page in SCALE_PAGES:
            progress(f"dashboard100k: {page} page, {devices:,} devices")
            rows.append(_time(client, DashboardRow(page, paths[page]), runs))
        targets = PolicyProgress.objects.filter(site=site).count()
        results.append(DashboardScale(devices, targets, seeded, certify, issued, rows))
    counts = {tuple(r.queries for r in s.pages) for s in results}
    if len(counts) > 1:
        results[-1].pages[0].problems.append(
            "dashboard100k: query counts differ between sizes: "
            + "; ".join(f"{s.devices:,}: " + ", ".join(f"{r.page} {r.queries}" for r in s.pages) for s in results)
        )
    return results
