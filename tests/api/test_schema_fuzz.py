"""Property-based API tests: schemathesis over the service's own generated OpenAPI schema.

Every operation in the schema is exercised in-process through the WSGI app (`fleet.wsgi`) with a
real OAuth2 bearer token holding every scope, against a database seeded with the example fleet
(see `seeded_fleet` in conftest.py). Schemathesis runs its coverage phase (boundary and
missing/invalid-value cases, positive and negative) and a fuzzing phase per operation.

Checks, on every response:
- no 5xx, ever (`not_a_server_error`);
- the response conforms to the schema: the status code is documented for the operation
  (`status_code_conformance`; the transport statuses docs/api.md documents once for every
  operation are exempt, as in every other test), the content type is the documented one
  (`content_type_conformance`), the body is valid against the documented schema
  (`response_schema_conformance`);
- every 4xx body is the uniform `ErrorResponse` `{detail, code, field_errors}`, whether or not the
  status code is documented (`error_response_shape`, below).

Not asserted: `positive_data_acceptance` and `negative_data_rejection`. The schema advertises
form-urlencoded and multipart bodies for JSON-shaped (nested) requests and does not give string
fields `minLength: 1` where DRF rejects "", so schema-valid requests are rejected with a 400 by
design; and django-filter ignores empty query filters (`?site=`) rather than rejecting them.

Each example runs inside a savepoint that is rolled back afterwards, so every example (and every
replay while Hypothesis shrinks) sees exactly the seeded database.

Generation is steered, never filtered (no generated case is dropped): for identifiers the schema
can only describe as "a uuid" or "a string", the hooks below often substitute real seeded values
(a real site id, a real execution with its current source key and `updated_at`, a real
site/satellite/resource-class scope), so that the fuzzing reaches the code past the
"not found"/"unknown slug" checks; every substituted value is itself valid for the schema. The
hooks also inject text PostgreSQL cannot store into free-form JSON, and send most form-encoded
fuzzing cases as JSON (see `flatmap_case`).
"""

from __future__ import annotations

import functools
import json
import os
import sys
from collections import Counter
from typing import Any

import jsonschema
import pytest
import schemathesis
from django.db import transaction
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from schemathesis.checks import load_all_checks, not_a_server_error
from schemathesis.core.failures import FailureGroup, as_reported_failure
from schemathesis.generation.feedback import FeedbackSources
from schemathesis.generation.hypothesis.reporting import ignore_hypothesis_output
from schemathesis.pytest._test_builder import build_operation_test
from schemathesis.python._constants.orchestrator import make_constants_value_source
from schemathesis.schemas import wrap_test_function
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from tests.api.conftest import Seeds
from tests.schema_validation import TRANSPORT_STATUSES

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("schema_fuzz")]

SCHEMA_PATH = "/api/schema/?format=json"
#: `make test-slow` sets FLEET_FUZZ=slow: the same checks with many more generated cases (at least
#: 1,000 for each seed operation, counted below), outside the everyday `make test`.
SLOW = os.environ.get("FLEET_FUZZ") == "slow"
MAX_EXAMPLES = 100 if SLOW else 20
#: The customer's three seed operations.
SEED_OPERATIONS = [
    "api_v1_burn_in_evaluations_results_create",
    "api_v1_burn_in_policy_progress_reconcile_create",
    "api_v1_burn_in_sites_rerun_plans_dispatch",
]
#: The operations this suite was written for get more examples: their bodies are the richest.
FOCUS_OPERATIONS = [*SEED_OPERATIONS, "api_v1_burn_in_executions_update"]
FOCUS_MAX_EXAMPLES = 50
#: In the slow part the seed operations get the most (their counts are asserted below).
SEED_MAX_EXAMPLES = 1000 if SLOW else FOCUS_MAX_EXAMPLES
#: Generated cases run per operationId in this session (every call of `test_api`).
CASES: Counter[str] = Counter()


def _config() -> schemathesis.Config:
    return schemathesis.Config.from_dict(
        {
            # Derandomized and without an example database: the same cases on every run.
            "generation": {"deterministic": True, "database": "none", "max-examples": MAX_EXAMPLES},
            # Bounded run time: the coverage phase probes two unexpected methods (not six) and
            # does not repeat query parameters.
            "phases": {
                "coverage": {"unexpected-methods": ["DELETE", "PATCH"], "generate-duplicate-query-parameters": False}
            },
            "operations": [
                {
                    "include-operation-id": [o for o in FOCUS_OPERATIONS if o not in SEED_OPERATIONS],
                    "generation": {"max-examples": max(FOCUS_MAX_EXAMPLES, MAX_EXAMPLES)},
                },
                {"include-operation-id": SEED_OPERATIONS, "generation": {"max-examples": SEED_MAX_EXAMPLES}},
            ],
        }
    )


# --- the ErrorResponse check ------------------------------------------------------------------


@functools.cache
def _error_validator(components: str) -> jsonschema.Draft202012Validator:
    return jsonschema.Draft202012Validator(
        {"$ref": "#/components/schemas/ErrorResponse", "components": {"schemas": json.loads(components)}}
    )


def _error_response_validator(case) -> jsonschema.Draft202012Validator:
    """`ErrorResponse` (with the two components it refers to) from the schema under test."""
    schemas = case.operation.schema.raw_schema["components"]["schemas"]
    components = {name: schemas[name] for name in ("ErrorResponse", "ErrorCodeEnum", "FieldError")}
    return _error_validator(json.dumps(components, sort_keys=True))


def error_response_shape(ctx, response, case) -> None:
    """Every 4xx is a JSON `ErrorResponse`; only a 400 carries `field_errors` (the component's
    description: "empty for non-field errors (auth, permission, not-found, conflict, server)")."""
    if not 400 <= response.status_code < 500:
        return None
    content_type = response.headers.get("content-type", [""])[0]
    assert content_type.split(";")[0].strip() == "application/json", (
        f"{response.status_code} is not an ErrorResponse: Content-Type {content_type!r}, "
        f"body {response.content[:200]!r}"
    )
    try:
        body = json.loads(response.content)
    except ValueError as exc:
        raise AssertionError(f"{response.status_code} body is not JSON: {response.content[:200]!r}") from exc
    problems = sorted(error.message for error in _error_response_validator(case).iter_errors(body))
    assert not problems, f"{response.status_code} body is not an ErrorResponse: {problems}; body {body!r}"
    if response.status_code != 400:
        assert body["field_errors"] == [], f"{response.status_code} carries field_errors: {body!r}"
    return None


def documented_status(ctx, response, case) -> None:
    """`status_code_conformance`, except for the statuses any operation may answer that docs/api.md
    documents once instead of on each operation (405, 406, 408, 411, 413, 414, 415, 429, 503; the
    same rule as every other test's, `tests/schema_validation.py`); their bodies are still checked by
    `error_response_shape`. (The coverage phase sends query strings over 4 kB: 414.)"""
    if response.status_code in TRANSPORT_STATUSES:
        return None
    return status_code_conformance(ctx, response, case)


CHECKS = [
    not_a_server_error,
    documented_status,
    content_type_conformance,
    response_schema_conformance,
    error_response_shape,
]

# --- steering toward real data ------------------------------------------------------------------

#: Filled by the `steering` fixture before Hypothesis draws anything; the hooks read it at draw
#: time.
SEEDS: Seeds | None = None


def _maybe(value: Any, real: list) -> st.SearchStrategy:
    """`value` as generated, or one of the real values (when there are any)."""
    if not real:
        return st.just(value)
    return st.one_of(st.just(value), st.sampled_from(real))


_PATH_IDS = {
    "/api/v1/burn-in/executions/{execution_id}/": ("execution_id", "execution_ids"),
    "/api/v1/burn-in/sites/{site_id}/progress-summary/": ("site_id", "site_ids"),
    "/api/v1/burn-in/sites/{site_id}/rerun-plans/": ("site_id", "site_ids"),
    "/api/v1/burn-in/sites/{site_id}/rerun-plans/dispatch/": ("site_id", "site_ids"),
    "/api/v1/devices/{id}/": ("id", "device_ids"),
    "/api/v1/jobs/{id}/": ("id", "job_ids"),
    "/api/v1/jobs/{id}/cancel/": ("id", "job_ids"),
    "/api/v1/jobs/{id}/finish/": ("id", "job_ids"),
    "/api/v1/jobs/{id}/heartbeat/": ("id", "job_ids"),
    "/api/v1/parameter-profiles/{id}/": ("id", "profile_ids"),
    "/api/v1/policies/{id}/": ("id", "policy_ids"),
    "/api/v1/satellites/{id}/": ("id", "satellite_ids"),
    "/api/v1/sites/{id}/": ("id", "site_ids"),
    "/api/v1/topologies/{id}/": ("id", "topology_ids"),
}

#: Query parameters (any list endpoint) that name seeded objects.
_QUERY_SEEDS = {
    "site": "site_ids",
    "site_slug": "site_slugs",
    "satellite": "satellite_ids",
    "device": "device_ids",
    "topology": "topology_ids",
    "resource_class": "resource_classes",
    "gate": "gates",
}


def flatmap_path_parameters(context, path_parameters):
    target = _PATH_IDS.get(context.operation.path) if SEEDS is not None else None
    if target is None or not isinstance(path_parameters, dict):
        return st.just(path_parameters)
    name, attribute = target
    real = getattr(SEEDS, attribute)
    if name == "execution_id":
        # The agent chooses the id: an unknown uuid creates the execution (PUT), a known one
        # updates it (GET finds it). Mostly fresh or real ids; the generated string now and then.
        choice = st.sampled_from(["generated", "real", "fresh", "fresh"])
        return choice.flatmap(
            lambda how: (
                st.just(path_parameters.get(name))
                if how == "generated"
                else st.sampled_from(real)
                if how == "real"
                else st.uuids().map(str)
            )
        ).map(lambda value: {**path_parameters, name: value})
    return _maybe(path_parameters.get(name), real).map(lambda value: {**path_parameters, name: value})


@st.composite
def _steered_query(draw, query: dict, path: str) -> dict:
    query = dict(query)
    if path in (
        "/api/v1/burn-in/evaluations/pending/",
        "/api/v1/satellites/resource-classes/",
        "/api/v1/satellites/node-states/",
    ):
        if draw(_mostly):
            query["site_slug"], query["satellite_name"] = draw(st.sampled_from(SEEDS.satellites))
    elif path == "/api/v1/policies/resolved-thresholds/":
        query["requirement"] = draw(_maybe(query.get("requirement"), SEEDS.requirement_ids))
        query["site"] = draw(_maybe(query.get("site"), SEEDS.site_ids))
    for name, attribute in _QUERY_SEEDS.items():
        if name in query:
            query[name] = draw(_maybe(query[name], getattr(SEEDS, attribute)))
    return {k: v for k, v in query.items() if v is not None}


def flatmap_query(context, query):
    if SEEDS is None or not isinstance(query, dict):
        return st.just(query)
    return st.one_of(st.just(query), _steered_query(query, context.operation.path))


#: Text that is valid in a JSON document and in the schema's free-form JSON (metric names, threshold
#: strings, execution parameters) but that PostgreSQL's jsonb cannot store: NUL (`\u0000`) and
#: unpaired surrogates (`\ud800`). The answer must be a 400, not a database error (a 500 before
#: commit 4fc02e0). Schemathesis' generic strings almost never put them there (Hypothesis excludes
#: surrogates), so the body hooks inject them now and then.
_jsonb_hostile_text = st.sampled_from(["\x00", "metric\x00name", "\ud800", "metric\udfffname"])
_sometimes = st.integers(0, 2).map(lambda n: n == 0)
_mostly = st.integers(0, 3).map(lambda n: n != 0)


def _with_hostile_metric(payload: dict, text: str) -> dict:
    """`payload` with one more metric evaluation, named and valued with `text` (schema-valid)."""
    metrics = payload.get("metric_evaluations")
    metrics = dict(metrics) if isinstance(metrics, dict) else {}
    metrics[text] = {"passed": True, "value_evaluation": {"passed": True, "threshold": text, "comparator": None}}
    return {**payload, "metric_evaluations": metrics}


@st.composite
def _steered_body(draw, body: dict, path: str) -> dict:
    body = dict(body)
    if path == "/api/v1/burn-in/evaluations/results/" and isinstance(body.get("results"), list):
        # Real pending executions (each at most once: a repeated id is a 400) with their current
        # source key and `updated_at`, or with one of them stale, so that the write path and both
        # stale paths are reached.
        results = []
        pending = list(draw(st.permutations(SEEDS.pending)))
        for item in body["results"]:
            if isinstance(item, dict) and pending:
                how = draw(st.sampled_from(["as generated", "current", "current", "stale key", "stale updated_at"]))
                if how != "as generated":
                    execution_id, key, updated_at = pending.pop()
                    item = {**item, "execution_id": execution_id}
                    if how != "stale key":
                        item["evaluation_source_key"] = key
                    if how != "stale updated_at":
                        item["expected_updated_at"] = updated_at
                if isinstance(item.get("evaluation_result"), dict) and draw(_sometimes):
                    item["evaluation_result"] = _with_hostile_metric(
                        item["evaluation_result"], draw(_jsonb_hostile_text)
                    )
            results.append(item)
        body["results"] = results
    elif path == "/api/v1/burn-in/policy-progress/reconcile/":
        if draw(_mostly):
            body["site_slug"], body["satellite_name"], body["resource_class"] = draw(st.sampled_from(SEEDS.scopes))
            if "gate" in body:
                body["gate"] = draw(st.sampled_from([body["gate"], None, *SEEDS.gates]))
            if "cursor" in body and draw(_mostly):
                # A cursor is signed by the service: a generated one is always (rightly) a 400.
                del body["cursor"]
    elif path.startswith("/api/v1/burn-in/sites/{site_id}/rerun-plans/"):
        if draw(_mostly):
            body["device_ids"] = draw(st.lists(st.sampled_from(SEEDS.device_ids), min_size=1, max_size=6, unique=True))
    elif path == "/api/v1/burn-in/executions/{execution_id}/":
        # The report must name a requirement and exactly one of a device or a topology (a rule
        # the schema cannot express); point it at real ones, the rest stays as generated.
        if SEEDS.execution_targets and draw(_mostly):
            requirement, target, target_id = draw(st.sampled_from(SEEDS.execution_targets))
            for name in ("test", "device_id", "topology_id", "job_id"):
                body.pop(name, None)
            body["requirement"], body[target] = requirement, target_id
            if SEEDS.job_ids and draw(st.booleans()):
                body["job_id"] = draw(st.sampled_from(SEEDS.job_ids))
            if draw(_sometimes):
                # `parameters` is free-form JSON and `metrics` keys are free text.
                text = draw(_jsonb_hostile_text)
                if draw(st.booleans()):
                    body["parameters"] = {text: text}
                else:
                    metrics = body.get("metrics")
                    body["metrics"] = {**(metrics if isinstance(metrics, dict) else {}), text: {}}
    elif path in (
        "/api/v1/jobs/claim/",
        "/api/v1/satellites/heartbeat/",
        "/api/v1/satellites/fingerprints/",
    ) and draw(_mostly):
        body["site_slug"], body["satellite_name"] = draw(st.sampled_from(SEEDS.satellites))
    return body


def flatmap_body(context, body):
    if SEEDS is None or not isinstance(body, dict):
        return st.just(body)
    return _steered_body(body, context.operation.path)


_FORM_MEDIA_TYPES = ("application/x-www-form-urlencoded", "multipart/form-data")


def _has_surrogates(value: Any) -> bool:
    if isinstance(value, str):
        return any("\ud800" <= char <= "\udfff" for char in value)
    if isinstance(value, dict):
        return any(_has_surrogates(k) or _has_surrogates(v) for k, v in value.items())
    if isinstance(value, list):
        return any(_has_surrogates(v) for v in value)
    return False


def flatmap_case(context, case):
    """The schema offers JSON, form-urlencoded and multipart for every request body (drf-spectacular
    lists every parser). DRF's form parsers cannot carry nested objects, arrays of objects or null,
    so most form-encoded cases of these bodies stop at "This field is required" before any logic
    runs. The coverage phase still sends every encoding; in the fuzzing phase, 3 of 4 form-encoded
    cases are sent as JSON instead (same body, which the same schema describes). A body carrying
    an unpaired surrogate (see `_jsonb_hostile_text`) can only travel as JSON (`"\\ud800"`): the
    client cannot encode it as form data at all."""
    if (
        case.media_type not in _FORM_MEDIA_TYPES
        or not isinstance(case.body, dict)
        or "application/json" not in context.operation.get_request_payload_content_types()
    ):
        return st.just(case)

    def as_json(keep: bool):
        if not keep:
            case.media_type = "application/json"
        return case

    if _has_surrogates(case.body):
        return st.just(as_json(False))
    return st.integers(0, 3).map(lambda n: as_json(n == 0))


@pytest.fixture
def steering(seeded_fleet):
    """Hand the seeded identifiers to the hooks before Hypothesis draws the first case."""
    global SEEDS
    SEEDS = seeded_fleet
    yield seeded_fleet
    SEEDS = None


# --- the test -------------------------------------------------------------------------------------


#: Request bodies whose nested lists the fuzz draws short. The inventory (GPUs, HCAs and their
#: ports, `missing`), the health evidence (Xid events) and the sweep's devices nest lists up to
#: 64-1,000 long; Hypothesis drew them at full width, and these two operations took 95 s and 82 s
#: of the suite's one fuzz worker on a loaded machine, most of it in generation (cProfile: 47 of
#: 56 s). Each list limit is held at its boundary by the operation's own tests
#: (tests/burnin/test_fingerprints.py, test_fingerprint_sweep.py, test_execution_health.py); the
#: fuzz still reaches every member, empty and non-empty lists, and the lists one item past the cap.
BOUNDED_BODIES = {"api_v1_burn_in_executions_update", "api_v1_satellites_fingerprints_create"}
FUZZ_MAX_ITEMS = 3


def _bounded(node: Any, components: dict[str, Any], seen: tuple[str, ...] = ()) -> Any:
    """`node` with every component it refers to inlined, and every list and map capped at
    `FUZZ_MAX_ITEMS` (a copy: the components, which responses share, stay as served)."""
    if isinstance(node, list):
        return [_bounded(item, components, seen) for item in node]
    if not isinstance(node, dict):
        return node
    ref = node.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/components/schemas/"):
        name = ref.rsplit("/", 1)[1]
        assert name not in seen, f"a recursive request body cannot be inlined: {seen + (name,)}"
        return _bounded(components[name], components, seen + (name,))
    bounded = {key: _bounded(value, components, seen) for key, value in node.items()}
    if bounded.get("type") == "array":
        assert bounded.get("minItems", 0) <= FUZZ_MAX_ITEMS, bounded
        bounded["maxItems"] = min(bounded.get("maxItems", FUZZ_MAX_ITEMS), FUZZ_MAX_ITEMS)
    elif bounded.get("type") == "object" and "additionalProperties" in bounded and not bounded.get("properties"):
        assert bounded.get("minProperties", 0) <= FUZZ_MAX_ITEMS, bounded
        bounded["maxProperties"] = min(bounded.get("maxProperties", FUZZ_MAX_ITEMS), FUZZ_MAX_ITEMS)
    return bounded


def _bound_request_bodies(raw: dict[str, Any]) -> dict[str, Any]:
    components = raw["components"]["schemas"]
    for operations in raw["paths"].values():
        for operation in operations.values():
            if isinstance(operation, dict) and operation.get("operationId") in BOUNDED_BODIES:
                operation["requestBody"] = _bounded(operation["requestBody"], components)
    return raw


def _load_schema():
    """The schema as the running service serves it, fetched through the WSGI app, with the
    steering hooks above and the request bodies of `BOUNDED_BODIES` drawn short. Loaded at import
    so that pytest gets one test per operation (`test_api[POST /api/v1/...]`); fetching it touches
    no database. (The lazy alternative, `schemathesis.pytest.from_fixture`, fails on pytest 9.2
    with schemathesis 4.32: `'Function' object has no attribute '_nodeid'`.)"""
    from werkzeug.test import Client

    from fleet.wsgi import application

    served = Client(application).get(SCHEMA_PATH, headers={"Host": "localhost"})
    assert served.status_code == 200, served.status
    loaded = schemathesis.openapi.from_dict(_bound_request_bodies(served.get_json()), config=_config())
    loaded.app = application
    loaded.location = SCHEMA_PATH
    for hook in (flatmap_path_parameters, flatmap_query, flatmap_body, flatmap_case):
        loaded.hook(hook)
    return loaded


schema = _load_schema()


@settings(
    # max_examples comes from the schemathesis config above (per operation).
    deadline=None,
    derandomize=True,
    database=None,
    # Fixtures are shared by every example on purpose (see the savepoint below), and some request
    # bodies are large: neither is a problem worth a warning.
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow, HealthCheck.data_too_large],
)
def _exercise(case, api_token):
    # The WSGI app runs in this thread, on the test's connection: a plain `db` test. Each example
    # runs in a savepoint that is always rolled back (also when the request broke the transaction).
    CASES[case.operation.definition.raw["operationId"]] += 1
    with transaction.atomic():
        try:
            case.call_and_validate(headers={"Authorization": f"Bearer {api_token}"}, checks=CHECKS)
        finally:
            transaction.set_rollback(True)


#: What `@schema.parametrize()` does to a test function, without building its Hypothesis tests at
#: collection: schemathesis builds each operation's test (and with it every coverage-phase case,
#: about 5 s of CPU for the whole schema) when it collects the module, in every pytest-xdist worker,
#: though one worker runs them. `test_api` builds its operation's test the same way
#: (`build_operation_test`, the plugin's own call, with the same configuration, hooks and seed),
#: when it runs.
_EXERCISE = wrap_test_function(_exercise)
_PARAMETRIZED = schema.clone(test_function=_EXERCISE)
OPERATIONS = {result.ok().label: result.ok() for result in _PARAMETRIZED.get_all_operations()}


@functools.cache
def _feedback() -> FeedbackSources:
    return FeedbackSources(constants_value_source=make_constants_value_source(_PARAMETRIZED))


@pytest.mark.parametrize("operation", list(OPERATIONS), ids=list(OPERATIONS))
@pytest.mark.django_db
def test_api(operation, steering, api_token, connection_kept_open):
    load_all_checks()
    exercise = build_operation_test(
        config=_PARAMETRIZED.config,
        operation=OPERATIONS[operation],
        test_func=_EXERCISE,
        given_kwargs={},
        feedback=_feedback(),
    )
    try:
        with ignore_hypothesis_output():
            exercise(api_token=api_token)
    except FailureGroup as exc:
        raise as_reported_failure(exc) from None


def test_each_seed_operation_got_its_generated_cases():
    """Runs after every `test_api[...]` above (pytest keeps file order): the cases really ran."""
    if not CASES:
        pytest.skip("no test_api case ran in this session (deselected)")
    print(  # noqa: T201 - the figures the reliability note quotes
        "\nschemathesis cases per operation: " + ", ".join(f"{op} {n}" for op, n in sorted(CASES.items())),
        file=sys.stderr,
    )
    for operation in SEED_OPERATIONS:
        if operation in CASES:
            assert CASES[operation] >= SEED_MAX_EXAMPLES, (operation, CASES[operation])
