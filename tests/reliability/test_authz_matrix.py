"""The authorization matrix: every operation of the generated schema × every way a caller can be
refused, each answered with the status and `ErrorResponse` docs/api.md documents, and not one row
of any table changed by the whole matrix.

Conditions and what docs/api.md ("Authentication", "Errors") promises for each:

* no credentials: 401 `not_authenticated`;
* a malformed bearer, an expired token, a token revoked through `/o/revoke_token/`: 401
  `authentication_failed`;
* a token without the operation's scope: 403 `permission_denied`;
* another site's satellite token, holding every satellite scope: acting on this site, or a read
  that names it (`NAMES_ITS_SITE`), 403 `permission_denied`; an inventory or job object of this
  site by id, 404 `not_found`; a list, 200 with none of this site's objects; an evaluation result
  for this site's execution, 200 counted `invalid`; policies and profiles are not per site;
* a person's session without permissions: 403 `permission_denied` (`whoami`: 200, any signed-in
  person);
* a session's unsafe request without the CSRF token: 403 `permission_denied` (the person holds
  every permission);
* a viewer's session (the `viewer` role: every `view_*` permission): every unsafe operation 403
  `permission_denied`; the reads listed in `VIEWER_READS` served (200);
* operations for operators only (`OPERATORS_ONLY`): any satellite's client, its own site's too, 403
  `permission_denied`;
* operations for satellites only (`SATELLITES_ONLY`): people (a viewer's session included) and
  operator clients, 403 `permission_denied`; another site's satellite too.

Every request is otherwise valid and names real objects of the site it targets (a positive control
with the right caller proves it would have been served), so each refusal has exactly one reason.
"""

from __future__ import annotations

import base64
import json
import sys
from dataclasses import dataclass
from datetime import timedelta
from typing import Any
from uuid import uuid4

import pytest
from django.contrib.auth.models import Group
from django.test import Client
from django.utils import timezone
from oauth2_provider.models import AccessToken

from fleet.access.roles import VIEWER, roles_sync
from fleet.events.services import subscription_create
from fleet.jobs.services import JobSpec, job_create
from fleet_rules.vocabulary import WorkflowName
from tests.builders import passing_payload, result_item
from tests.conftest import CLIENT_SECRET, client_credentials_app, fetch_token
from tests.payloads import inventory
from tests.reliability.checksums import changed_tables, table_checksums
from tests.schema_validation import ValidatingAPIClient, generated_schema

pytestmark = pytest.mark.slow

SATELLITE_SCOPES = [
    "fleet:read",
    "test-execution:report",
    "test-execution:evaluate",
    "burn-in-policy-progress:write",
    "job:run",
]
ALL_SCOPES = [*SATELLITE_SCOPES, "job:create", "webhooks:manage"]

CONDITIONS = (
    "no_credentials",
    "malformed_bearer",
    "expired_token",
    "revoked_token",
    "token_without_scope",
    "other_site_satellite",
    "session_without_permission",
    "session_post_without_csrf",
    "viewer_session",
)

#: Operations for people and their operator clients: a satellite's client is refused (403) whatever
#: its site, though it holds the scope.
OPERATORS_ONLY = {
    ("GET", "/api/v1/devices/{device_id}/evidence-pack/"),
    # the device lifecycle is people's: a satellite's client is refused even its reads
    ("GET", "/api/v1/devices/{device_id}/history/"),
    ("GET", "/api/v1/devices/{device_id}/repairs/"),
    ("GET", "/api/v1/burn-in/sites/{site_id}/repair-queue/"),
    ("GET", "/api/v1/burn-in/sites/{site_id}/breakers/"),
    ("GET", "/api/v1/burn-in/sites/{site_id}/autopilot/"),
    *(
        (method, f"/api/v1/webhooks/subscriptions/{path}")
        for method, path in (
            ("GET", ""),
            ("POST", ""),
            ("GET", "{subscription_id}/"),
            ("PATCH", "{subscription_id}/"),
            ("DELETE", "{subscription_id}/"),
            ("GET", "{subscription_id}/deliveries/"),
            ("POST", "{subscription_id}/redeliver/"),
        )
    ),
}
#: Admins' operations (webhook subscriptions hold signing secrets): a viewer is refused its reads too.
ADMINS_ONLY = {key for key in OPERATORS_ONLY if key[1].startswith("/api/v1/webhooks/")}
#: Operations for satellites' agents: people and operator clients are refused (403), though they
#: hold the scope and the permission.
SATELLITES_ONLY = {("GET", "/api/v1/satellites/node-states/"), ("POST", "/api/v1/satellites/fingerprints/")}
#: Reads whose answer to a viewer the matrix checks (served: 200).
VIEWER_READS = {("GET", "/api/v1/devices/{device_id}/evidence-pack/")}

#: Operations that are not confined to a site: the other site's satellite may use them.
NOT_SITE_SCOPED = {
    ("GET", "/api/v1/auth/whoami/"),
    ("GET", "/api/v1/policies/"),
    ("GET", "/api/v1/policies/{id}/"),
    ("GET", "/api/v1/parameter-profiles/"),
    ("GET", "/api/v1/parameter-profiles/{id}/"),
}


#: Reads that name the site (or satellite) they are about: another site's client is refused (403).
#: Reads of a list or of an inventory object by id are filtered instead: the other site's objects
#: are not there for it (200 without them, 404).
NAMES_ITS_SITE = {
    "/api/v1/burn-in/evaluations/pending/",  # ?site_slug=&satellite_name=
    "/api/v1/satellites/resource-classes/",  # ?site_slug=&satellite_name=
    "/api/v1/satellites/node-states/",  # ?site_slug=&satellite_name=
    "/api/v1/policies/resolved-thresholds/",  # ?site=
    "/api/v1/burn-in/executions/{execution_id}/",  # checked against the execution's site
}
#: ... and so does every operation under a site's path (progress summary, attempts, outliers, diagnoses,
#: isolation plans).
SITE_PATH = "/api/v1/burn-in/sites/{site_id}/"


@dataclass
class World:
    site: Any
    other_site: Any
    satellite: Any
    device: Any
    topology: Any
    requirement: Any
    policy: Any
    profile: Any
    execution: Any  # evaluated
    pending: Any  # finished, not evaluated
    job: Any
    key: str
    subscription: Any


@pytest.fixture
def world(fleet) -> World:
    site, other = fleet.site("lon-1"), fleet.site("ams-1")
    satellite = fleet.satellite(site, "sat-a", workflows=list(WorkflowName.values))
    fleet.satellite(other, "sat-b", workflows=list(WorkflowName.values))
    rack = fleet.topology(satellite, "rack", "rack-a01")
    devices = [fleet.device(satellite, topologies=[rack]) for _ in range(3)]
    policy = fleet.policy("gpu.h200.8x")
    diag = fleet.requirement(policy, "gpu-diag")
    profile = fleet.profile("gpu.h200.8x", "dcgm-diag", {"level": 3})
    key = fleet.source_key(diag, site)
    evaluated = fleet.execution(diag, device=devices[0])
    pending = fleet.execution(diag, device=devices[1])
    client = _bearer_client(_superuser_app("seeder"), ALL_SCOPES)
    done = client.post(
        "/api/v1/burn-in/evaluations/results/", {"results": [result_item(evaluated, key)]}, format="json"
    )
    assert done.status_code == 200 and done.json()["written"] == 1, done.content
    swept = client.post(
        "/api/v1/burn-in/policy-progress/reconcile/",
        {"site_slug": "lon-1", "satellite_name": "sat-a", "resource_class": "gpu.h200.8x"},
        format="json",
    )
    assert swept.status_code == 200, swept.content
    job = job_create(
        spec=JobSpec(
            site_id=site.id,
            satellite_id=satellite.id,
            workflow_name=WorkflowName.SINGLE_NODE,
            device_ids=(devices[2].id,),
        ),
        requested_by="test",
    )
    subscription = subscription_create(
        name="matrix", url="http://127.0.0.1:9/hook", allow_private=True, actor="test"
    ).subscription
    return World(
        site, other, satellite, devices[0], rack, diag, policy, profile, evaluated, pending, job, key, subscription
    )


def _superuser_app(name: str):
    from django.contrib.auth import get_user_model

    owner, _ = get_user_model().objects.get_or_create(username=f"owner-of-{name}", defaults={"is_superuser": True})
    return client_credentials_app(name, owner)


def _bearer_client(app, scopes: list[str]) -> ValidatingAPIClient:
    client = ValidatingAPIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {fetch_token(client, app, scopes)}")
    return client


# --- the requests ---------------------------------------------------------------------------------


def _path(template: str, w: World) -> str:
    by_prefix = {
        "/api/v1/devices/": w.device.id,
        "/api/v1/jobs/": w.job.id,
        "/api/v1/parameter-profiles/": w.profile.id,
        "/api/v1/policies/": w.policy.id,
        "/api/v1/satellites/": w.satellite.id,
        "/api/v1/sites/": w.site.id,
        "/api/v1/topologies/": w.topology.id,
    }
    path = (
        template.replace("{execution_id}", str(w.execution.id))
        .replace("{site_id}", str(w.site.id))
        .replace("{device_id}", str(w.device.id))
        .replace("{resource_class}", "gpu.h200.8x")
        .replace("{subscription_id}", str(w.subscription.id))
    )
    # No isolation plan exists: every refusal comes before the lookup (the positive control is a 404).
    path = path.replace("{plan_id}", str(uuid4()))
    if "{id}" in path:
        prefix = next(p for p in by_prefix if path.startswith(p))
        path = path.replace("{id}", str(by_prefix[prefix]))
    return path


def _query(template: str, w: World) -> dict[str, str]:
    if template in (
        "/api/v1/burn-in/evaluations/pending/",
        "/api/v1/satellites/resource-classes/",
        "/api/v1/satellites/node-states/",
    ):
        return {"site_slug": "lon-1", "satellite_name": "sat-a"}
    if template == "/api/v1/policies/resolved-thresholds/":
        return {"requirement": str(w.requirement.id), "site": str(w.site.id)}
    if template == "/api/v1/burn-in/sites/{site_id}/attempts/":
        return {"requirement": "gpu-diag", "target": str(w.device.id)}
    return {}


def _body(method: str, template: str, w: World) -> dict[str, Any] | None:
    if method == "GET":
        return None
    bodies: dict[str, dict[str, Any]] = {
        "/api/v1/burn-in/evaluations/results/": {"results": [result_item(w.pending, w.key, passing_payload())]},
        "/api/v1/burn-in/executions/{execution_id}/": {
            "requirement": "gpu-diag",
            "device_id": str(w.device.id),
            "status": "running",
            "parameters": {},
            "metrics": {},
            "started_at": "2026-11-30T10:00:00Z",
        },
        "/api/v1/burn-in/policy-progress/reconcile/": {
            "site_slug": "lon-1",
            "satellite_name": "sat-a",
            "resource_class": "gpu.h200.8x",
        },
        "/api/v1/burn-in/sites/{site_id}/rerun-plans/": {"device_ids": [str(w.device.id)]},
        "/api/v1/burn-in/sites/{site_id}/rerun-plans/dispatch/": {"device_ids": [str(w.device.id)]},
        "/api/v1/devices/{device_id}/accept/": {},  # the device holds a certificate: served
        "/api/v1/devices/{device_id}/transitions/": {"to": "maintenance", "reason": "matrix"},
        "/api/v1/devices/{device_id}/repairs/": {"summary": "swapped GPU 3"},  # not in repair: a 409
        "/api/v1/burn-in/sites/{site_id}/breakers/{resource_class}/reset/": {"reason": "matrix"},  # none open: 404
        "/api/v1/jobs/claim/": {"site_slug": "lon-1", "satellite_name": "sat-a"},
        "/api/v1/satellites/fingerprints/": {
            "site_slug": "lon-1",
            "satellite_name": "sat-a",
            "devices": [{"hostname": w.device.hostname, "inventory": inventory()}],
        },
        "/api/v1/burn-in/sites/{site_id}/isolation-plans/": {
            "topology_id": str(w.topology.id),
            "requirement": "gpu-diag",
        },
        "/api/v1/burn-in/sites/{site_id}/isolation-plans/dispatch/": {
            "topology_id": str(w.topology.id),
            "requirement": "gpu-diag",
        },
        "/api/v1/burn-in/sites/{site_id}/isolation-plans/{plan_id}/advance/": {},
        "/api/v1/webhooks/subscriptions/": {"name": "matrix-new", "url": "https://example.com/hook"},
        "/api/v1/webhooks/subscriptions/{subscription_id}/": {"active": True},
        "/api/v1/webhooks/subscriptions/{subscription_id}/redeliver/": {},
        "/api/v1/jobs/{id}/cancel/": {},
        "/api/v1/jobs/{id}/finish/": {"status": "succeeded"},
        "/api/v1/jobs/{id}/heartbeat/": {},
        "/api/v1/satellites/heartbeat/": {
            "site_slug": "lon-1",
            "satellite_name": "sat-a",
            "workflows": [{"name": "SingleNodeBurnInWorkflow", "version": "1"}],
        },
    }
    return bodies[template]


@dataclass(frozen=True)
class Operation:
    method: str
    template: str  # as the schema writes it
    operation_id: str
    scopes: tuple[str, ...]


def schema_operations() -> list[Operation]:
    raw = generated_schema().raw_schema
    found = []
    for template, item in raw["paths"].items():
        for method, operation in item.items():
            if method not in ("get", "post", "put", "patch", "delete"):
                continue
            scopes = next((s["oauth2"] for s in operation.get("security", []) if "oauth2" in s), [])
            found.append(Operation(method.upper(), template, operation["operationId"], tuple(scopes)))
    return sorted(found, key=lambda o: (o.template, o.method))


def _send(client, operation: Operation, w: World, **extra):
    path = _path(operation.template, w)
    body = _body(operation.method, operation.template, w)
    if operation.method == "GET":
        return client.get(path, _query(operation.template, w), **extra)
    return client.generic(operation.method, path, json.dumps(body), content_type="application/json", **extra)


def _wrong_scope(operation: Operation) -> list[str]:
    return ["job:run"] if "job:run" not in operation.scopes else ["fleet:read"]


# --- what docs/api.md promises --------------------------------------------------------------------


def expected(operation: Operation, condition: str) -> tuple[int, str | None] | None:
    """(status, code) the docs promise; None where the condition does not apply."""
    key = (operation.method, operation.template)
    unsafe = operation.method not in ("GET", "HEAD", "OPTIONS")
    if condition == "no_credentials":
        return 401, "not_authenticated"
    if condition in ("malformed_bearer", "expired_token", "revoked_token"):
        return 401, "authentication_failed"
    if condition == "token_without_scope":
        return 403, "permission_denied"
    if condition == "session_without_permission":
        return (200, None) if key == ("GET", "/api/v1/auth/whoami/") else (403, "permission_denied")
    if condition == "session_post_without_csrf":
        return (403, "permission_denied") if unsafe else None
    if condition == "viewer_session":
        if key in ADMINS_ONLY:
            return 403, "permission_denied"
        if key in VIEWER_READS:
            return 200, None
        if key in SATELLITES_ONLY:
            return 403, "permission_denied"
        return (403, "permission_denied") if unsafe else None
    assert condition == "other_site_satellite"
    if key in NOT_SITE_SCOPED:
        return None
    if key in OPERATORS_ONLY:
        return 403, "permission_denied"  # no satellite's client, of any site
    if "job:create" in operation.scopes or "webhooks:manage" in operation.scopes:
        return 403, "permission_denied"  # a satellite's client cannot hold the operators' scope
    if operation.template == "/api/v1/burn-in/evaluations/results/":
        return 200, "invalid"  # counted invalid, nothing written
    if unsafe or operation.template in NAMES_ITS_SITE or operation.template.startswith(SITE_PATH):
        return 403, "permission_denied"  # acting as (or on) a satellite or site of another site
    if "{" in operation.template:
        return 404, "not_found"
    return 200, "empty"  # a list: none of the other site's objects


def _outcome(response, condition: str, operation: Operation, w: World) -> tuple[int, str | None]:
    status = response.status_code
    body = response.json() if response.content and response["Content-Type"] == "application/json" else {}
    if status >= 400:
        return status, body.get("code")
    if operation.template == "/api/v1/burn-in/evaluations/results/":
        return status, "invalid" if (body.get("invalid"), body.get("written")) == (1, 0) else "written"
    if condition == "other_site_satellite" and "{" not in operation.template:
        own = {str(w.site.id), str(w.satellite.id), str(w.device.id), str(w.job.id), str(w.topology.id)}
        text = response.content.decode()
        return status, "leak" if any(i in text for i in own) else "empty"
    return status, None


# --- the test -------------------------------------------------------------------------------------


def test_every_operation_refuses_every_wrong_caller_as_documented_and_writes_nothing(
    world, settings, user_factory, oauth_client
):
    # The matrix fails authentication on purpose a few hundred times from one address: lift the
    # protective throttles for it (they have their own tests in tests/hardening).
    settings.THROTTLES = {**settings.THROTTLES, "AUTH_FAILURES": "100000/min"}
    settings.REST_FRAMEWORK = {
        **settings.REST_FRAMEWORK,
        "DEFAULT_THROTTLE_RATES": {"anon": "100000/min", "client": "100000/min"},
    }
    operations = schema_operations()
    assert len(operations) >= 31, [o.operation_id for o in operations]
    w = world

    # The callers, each made through the real endpoints.
    anonymous = ValidatingAPIClient()
    malformed = ValidatingAPIClient()
    malformed.credentials(HTTP_AUTHORIZATION="Bearer not a token")
    expired = _bearer_client(_superuser_app("expired"), ALL_SCOPES)
    AccessToken.objects.filter(application__name="expired").update(expires=timezone.now() - timedelta(seconds=1))
    revoked_app = _superuser_app("revoked")
    revoked = ValidatingAPIClient()
    token = fetch_token(revoked, revoked_app, ALL_SCOPES)
    basic = base64.b64encode(f"{revoked_app.client_id}:{CLIENT_SECRET}".encode()).decode()
    gone = Client().post("/o/revoke_token/", {"token": token}, HTTP_AUTHORIZATION=f"Basic {basic}")
    assert gone.status_code == 200, gone.content
    revoked.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    scoped_app = _superuser_app("narrow")
    narrow = {scopes: _bearer_client(scoped_app, list(scopes)) for scopes in (("job:run",), ("fleet:read",))}
    from fleet.inventory.models import Satellite

    other_satellite = _bearer_client(
        oauth_client(name="sat-b-client", satellite=Satellite.objects.get(name="sat-b")), SATELLITE_SCOPES
    )
    nobody = ValidatingAPIClient(enforce_csrf_checks=True)
    nobody.force_login(user_factory(username="nobody"))
    nobody.get("/accounts/login/")  # the csrftoken cookie, so that only the permission is missing
    csrf = {"HTTP_X_CSRFTOKEN": nobody.cookies["csrftoken"].value}
    admin = ValidatingAPIClient(enforce_csrf_checks=True)
    admin.force_login(user_factory(username="boss", superuser=True))
    roles_sync()
    viewer = ValidatingAPIClient(enforce_csrf_checks=True)
    viewing = user_factory(username="watcher")
    viewing.groups.add(Group.objects.get(name=VIEWER))
    viewer.force_login(viewing)
    viewer.get("/accounts/login/")
    viewer_csrf = {"HTTP_X_CSRFTOKEN": viewer.cookies["csrftoken"].value}

    before = table_checksums()
    assert len(before) > 30 and all(before[t][0] > 0 for t in ("inventory_device", "jobs_job", "burnin_policyprogress"))
    cells, deviations = 0, []
    for operation in operations:
        for condition in CONDITIONS:
            want = expected(operation, condition)
            if want is None:
                continue
            extra: dict[str, str] = {}
            client = {
                "no_credentials": anonymous,
                "malformed_bearer": malformed,
                "expired_token": expired,
                "revoked_token": revoked,
                "other_site_satellite": other_satellite,
                "session_without_permission": nobody,
                "session_post_without_csrf": admin,
                "viewer_session": viewer,
            }.get(condition)
            if condition == "token_without_scope":
                client = narrow[tuple(_wrong_scope(operation))]
            if condition == "session_without_permission" and operation.method != "GET":
                extra = csrf
            if condition == "viewer_session" and operation.method != "GET":
                extra = viewer_csrf
            response = _send(client, operation, w, **extra)
            got = _outcome(response, condition, operation, w)
            cells += 1
            if got != want:
                deviations.append((operation.operation_id, condition, want, got, response.content[:200]))
    after = table_checksums()
    print(  # noqa: T201 - the figure the reliability note quotes
        f"\nauthorization matrix: {len(operations)} operations x {len(CONDITIONS)} conditions, "
        f"{cells} cells, {len(deviations)} deviations, tables changed: {changed_tables(before, after)}",
        file=sys.stderr,
    )
    assert not deviations, "\n".join(map(str, deviations))
    assert changed_tables(before, after) == []
    assert cells >= len(operations) * 6

    # Positive controls: with the right caller each of these requests is served (not 401/403),
    # so every refusal above had the condition as its only reason.
    operator = _bearer_client(_superuser_app("operator"), ALL_SCOPES)
    own_satellite = _bearer_client(oauth_client(name="sat-a-client", satellite=w.satellite), SATELLITE_SCOPES)
    for operation in operations:
        operators_only = (operation.method, operation.template) in OPERATORS_ONLY
        if operators_only:  # ... and its own site's satellite is refused too
            refused = _send(own_satellite, operation, w)
            assert (refused.status_code, refused.json()["code"]) == (403, "permission_denied"), operation
        if (operation.method, operation.template) in SATELLITES_ONLY:  # ... and an operator's client is refused
            refused = _send(operator, operation, w)
            assert (refused.status_code, refused.json()["code"]) == (403, "permission_denied"), operation
        client = operator if "job:create" in operation.scopes or operators_only else own_satellite
        if operation.method == "DELETE":
            continue  # served below, last: the later controls need the subscription
        if operation.template == "/api/v1/burn-in/executions/{execution_id}/" and operation.method == "PUT":
            w.execution.id = uuid4()  # a fresh report; the stored one is completed
        response = _send(client, operation, w)
        assert response.status_code not in (401, 403), (operation.operation_id, response.content[:300])
    for operation in operations:
        if operation.method == "DELETE":
            response = _send(operator, operation, w)
            assert response.status_code not in (401, 403), (operation.operation_id, response.content[:300])
