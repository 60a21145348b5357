"""Fixtures for the schema-driven API fuzz tests: the example fleet with some burn-in evidence,
one token with every scope, and a database connection that survives requests sent through the
WSGI app."""

from __future__ import annotations

import functools
from collections.abc import Iterator
from dataclasses import dataclass, field

import pytest
import yaml
from django.contrib.auth import get_user_model
from django.core import signals
from django.db import close_old_connections, transaction
from django.test import override_settings
from rest_framework.test import APIClient

from tests.builders import FleetBuilder, failing_payload, passing_payload, result_item
from tests.conftest import client_credentials_app, fetch_token
from tests.helpers import REPO, suite_certificate_key

#: Racks a01 and a02 (H200), the spare a04-n05 (staged, not enrolled) and four GB200 trays.
KEPT_DEVICES = {
    *(f"a0{rack}-n0{node}" for rack in (1, 2) for node in (1, 2, 3, 4)),
    "a04-n05",
    *(f"b01-t0{tray}" for tray in (1, 2, 3, 4)),
    "c01-n01",
    "c01-n02",
}

ALL_SCOPES = [
    "fleet:read",
    "test-execution:report",
    "test-execution:evaluate",
    "burn-in-policy-progress:write",
    "job:run",
    "job:create",
]


@pytest.fixture
def connection_kept_open(seeded_fleet, api_token):
    """Schemathesis calls the WSGI app in this thread, on pytest-django's connection. Django's
    request signals run `close_old_connections`, which closes a connection that is inside a
    transaction (autocommit off), i.e. the test's, and every later query then fails (the service
    answers 503). Django's own test client disconnects it around each of its requests and
    reconnects it afterwards, so this fixture depends on the fixtures that use the test client
    (it must be set up after them) and keeps the handler disconnected for the rest of the test.
    A response's `close()` (which sends `request_finished`) may come after the call returns."""
    signals.request_started.disconnect(close_old_connections)
    signals.request_finished.disconnect(close_old_connections)
    try:
        yield
    finally:
        signals.request_started.connect(close_old_connections)
        signals.request_finished.connect(close_old_connections)


@pytest.fixture
def api_token(seeded_world) -> str:
    """A real client-credentials token (through /o/token/) holding every scope, not bound to a
    satellite: the one the seeded world was built with."""
    return seeded_world[1]


@dataclass
class Seeds:
    """Real identifiers in the seeded database, each list in a stable order (by a natural key, not
    by uuid) so that a derandomized run picks the same objects every time."""

    site_ids: list[str] = field(default_factory=list)
    site_slugs: list[str] = field(default_factory=list)
    satellites: list[tuple[str, str]] = field(default_factory=list)  # (site_slug, satellite_name)
    satellite_ids: list[str] = field(default_factory=list)
    scopes: list[tuple[str, str, str]] = field(default_factory=list)  # (site_slug, satellite_name, resource_class)
    resource_classes: list[str] = field(default_factory=list)
    gates: list[str] = field(default_factory=list)
    requirement_ids: list[str] = field(default_factory=list)
    requirement_names: list[str] = field(default_factory=list)
    device_ids: list[str] = field(default_factory=list)
    topology_ids: list[str] = field(default_factory=list)
    policy_ids: list[str] = field(default_factory=list)
    profile_ids: list[str] = field(default_factory=list)
    job_ids: list[str] = field(default_factory=list)
    execution_ids: list[str] = field(default_factory=list)
    # (requirement name, "device_id" or "topology_id", id): what an execution report may name
    execution_targets: list[tuple[str, str, str]] = field(default_factory=list)
    # (execution_id, evaluation_source_key, expected_updated_at) of executions still pending
    pending: list[tuple[str, str, str]] = field(default_factory=list)
    # rows of a few tables as seeded, which every test must find again
    counts: dict[str, int] = field(default_factory=dict)


@functools.cache
def _small_example_fleet() -> str:
    example = yaml.safe_load((REPO / "examples" / "fleet.yaml").read_text())
    for site in example["sites"]:
        site["devices"] = [d for d in site["devices"] if d["hostname"] in KEPT_DEVICES]
    return yaml.safe_dump(example)


@pytest.fixture(scope="module")
def seeded_world(django_db_setup, django_db_blocker) -> Iterator[tuple[Seeds, str]]:
    """The seeded fleet (`_seed`) and its token, built once for the module that uses them, inside
    a transaction that stays open until the module's last test and is then rolled back. Each test
    runs in a savepoint of it (pytest-django's `db`), as with Django's `TestCase.setUpTestData`,
    so every test still starts from exactly the seeded database and leaves nothing behind; the
    schemathesis module built the same fleet again for each of its ~60 tests (2-4 s each)."""
    with (
        django_db_blocker.unblock(),
        # What the suite's autouse fixtures set for each test (tests/conftest.py), for this scope.
        override_settings(
            PASSWORD_HASHERS=["django.contrib.auth.hashers.MD5PasswordHasher"],
            CERTIFICATE_KEY_FILE=str(suite_certificate_key()),
        ),
    ):
        world = transaction.atomic()
        # As TestCase's class-wide atomic: the service's durable blocks count from the test's.
        world._from_testcase = True
        world.__enter__()
        try:
            from fleet.burnin.certificates.signing import signing_key_publish

            signing_key_publish()
            owner, _ = get_user_model().objects.get_or_create(
                username="owner-of-schema-fuzz", defaults={"is_superuser": True}
            )
            token = fetch_token(APIClient(), client_credentials_app("schema-fuzz", owner), ALL_SCOPES)
            yield _seed(token), token
        finally:
            transaction.set_rollback(True)
            world.__exit__(None, None, None)


@pytest.fixture
def seeded_fleet(db, seeded_world) -> Seeds:
    """The seeded identifiers, for a test that runs in the seeded world's transaction, which the
    tests before it left as seeded (what they wrote was rolled back with their savepoints)."""
    seeds = seeded_world[0]
    assert _counts() == seeds.counts, (_counts(), seeds.counts)
    return seeds


def _counts() -> dict[str, int]:
    from fleet.burnin.models import TestExecution
    from fleet.inventory.models import Device
    from fleet.jobs.models import Job

    return {
        "devices": Device.objects.count(),
        "executions": TestExecution.objects.count(),
        "jobs": Job.objects.count(),
    }


def _seed(api_token: str) -> Seeds:
    """examples/fleet.yaml, applied as `fleet apply` does, plus evidence reported and evaluated
    through the API so that every list endpoint has rows to render: executions (some evaluated,
    some pending), policy-progress rows from a reconcile, and a rerun job from a dispatch."""
    from fleet.burnin.models import TestExecution
    from fleet.fleetfile.apply import fleet_apply
    from fleet.fleetfile.document import parse_text
    from fleet.inventory.models import Device, Satellite, Site, Topology
    from fleet.jobs.models import Job
    from fleet.policies.models import AcceptancePolicy, ParameterProfile, Requirement
    from fleet_rules.vocabulary import WorkflowName

    # The example fleet, with its device list cut down: every site, satellite, topology, policy and
    # profile stays, but 15 devices instead of 39 (the AMD rack's among them) keep every list
    # response (and so every example) cheap without losing any kind of object.
    fleet_apply(document=parse_text(_small_example_fleet()))
    # The satellites advertise both workflows, as their agents' heartbeats would, so that a rerun
    # dispatch can actually create jobs.
    Satellite.objects.update(advertised_workflows=[{"name": w, "version": "1"} for w in WorkflowName.values])

    site = Site.objects.get(slug="lon-1")
    builder = FleetBuilder()
    h200 = Requirement.objects.get(policy__resource_class="gpu.h200.8x", name="gpu-diag")
    devices = {d.hostname: d for d in Device.objects.filter(site=site)}
    key = builder.source_key(h200, site)

    evaluated = [builder.execution(h200, device=devices[h]) for h in ("a01-n01", "a01-n02", "a01-n03")]
    failed = builder.execution(h200, device=devices["a02-n01"], metrics={"diag_failed_tests": {"value": 2}})
    pending = [builder.execution(h200, device=devices[h]) for h in ("a01-n04", "a02-n02", "a02-n03", "a02-n04")]

    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {api_token}")
    items = [result_item(e, key, passing_payload()) for e in evaluated] + [result_item(failed, key, failing_payload())]
    response = client.post("/api/v1/burn-in/evaluations/results/", {"results": items}, format="json")
    assert response.status_code == 200, response.content
    for sat, resource_class in (("sat-a", "gpu.h200.8x"), ("sat-b", "gpu.gb200.nvl72")):
        cursor = None
        while True:
            body = {"site_slug": "lon-1", "satellite_name": sat, "resource_class": resource_class, "cursor": cursor}
            response = client.post("/api/v1/burn-in/policy-progress/reconcile/", body, format="json")
            assert response.status_code == 200, response.content
            cursor = response.json()["next_cursor"]
            if cursor is None:
                break
    response = client.post(
        f"/api/v1/burn-in/sites/{site.id}/rerun-plans/dispatch/", {"device_ids": [str(failed.device_id)]}, format="json"
    )
    assert response.status_code == 200, response.content
    assert Job.objects.exists(), response.content

    def ids(queryset, *order) -> list[str]:
        return [str(pk) for pk in queryset.order_by(*order).values_list("id", flat=True)]

    satellites = list(Satellite.objects.select_related("site").order_by("site__slug", "name"))
    requirements = Requirement.objects.select_related("policy").order_by("policy__resource_class", "name")
    scopes = sorted(
        {(d.site.slug, d.satellite.name, d.resource_class) for d in Device.objects.select_related("site", "satellite")}
    )
    targets = []
    for requirement in requirements.filter(retired_at__isnull=True):
        resource_class = requirement.policy.resource_class
        if requirement.scope == "multi_node":
            topology = (
                Topology.objects.filter(unit=requirement.unit, memberships__device__resource_class=resource_class)
                .order_by("label")
                .first()
            )
            if topology is not None:
                targets.append((requirement.name, "topology_id", str(topology.id)))
        else:
            device = Device.objects.filter(resource_class=resource_class).order_by("hostname").first()
            targets.append((requirement.name, "device_id", str(device.id)))
    return Seeds(
        execution_targets=targets,
        site_ids=ids(Site.objects, "slug"),
        site_slugs=sorted(Site.objects.values_list("slug", flat=True)),
        satellites=[(s.site.slug, s.name) for s in satellites],
        satellite_ids=[str(s.id) for s in satellites],
        scopes=scopes,
        resource_classes=sorted({rc for *_, rc in scopes}),
        gates=sorted(set(requirements.values_list("gate", flat=True))),
        requirement_ids=[str(r.id) for r in requirements],
        requirement_names=sorted({r.name for r in requirements}),
        device_ids=ids(Device.objects, "hostname"),
        topology_ids=ids(Topology.objects, "label"),
        policy_ids=ids(AcceptancePolicy.objects, "resource_class", "version"),
        profile_ids=ids(ParameterProfile.objects, "resource_class", "test", "name"),
        job_ids=ids(Job.objects, "created_at"),
        execution_ids=ids(TestExecution.objects, "device__hostname", "started_at"),
        pending=[(str(e.id), key, e.updated_at.isoformat()) for e in pending],
        counts=_counts(),
    )
