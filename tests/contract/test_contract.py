"""The three seed operations must match the customer's spec exactly (structurally)."""

from __future__ import annotations

import copy

import pytest
from drf_spectacular.generators import SchemaGenerator

from tests.contract.harness import (
    compare,
    contract_differences,
    load_spec,
    report,
    shared_components_differences,
)

SPEC_FILES = [
    "evaluation-results-upsert.yaml",
    "policy-progress-reconcile.yaml",
    "rerun-plans-dispatch.yaml",
]


@pytest.fixture(scope="module")
def generated() -> dict:
    return SchemaGenerator().get_schema(request=None, public=True)


@pytest.mark.parametrize("spec_file", SPEC_FILES)
def test_shared_error_components_and_security_schemes_match_spec(spec_file, generated):
    differences = shared_components_differences(load_spec(spec_file), generated)
    assert not differences, report(differences)


@pytest.mark.parametrize("spec_file", SPEC_FILES)
def test_seed_operation_matches_spec(spec_file, generated):
    differences = contract_differences(load_spec(spec_file), generated)
    assert not differences, report(differences)


@pytest.mark.parametrize("spec_file", SPEC_FILES)
def test_harness_passes_on_identical_copy(spec_file):
    spec = load_spec(spec_file)
    assert contract_differences(spec, copy.deepcopy(spec)) == []


def _alterations(spec: dict) -> list:
    """Ways to break a copy of a spec: each must be reported."""
    path = next(iter(spec["paths"]))
    method = next(iter(spec["paths"][path]))

    def operation_id(doc):
        doc["paths"][path][method]["operationId"] += "_x"

    def scope(doc):
        doc["paths"][path][method]["security"][0]["oauth2"] = ["other:scope"]

    def drop_media_type(doc):
        doc["paths"][path][method]["requestBody"]["content"].pop("multipart/form-data")

    def error_enum(doc):
        doc["components"]["schemas"]["ErrorCodeEnum"]["enum"].remove("throttled")

    def field_error_description(doc):
        doc["components"]["schemas"]["FieldError"]["properties"]["field"]["description"] = "A path."

    def request_required(doc):
        ref = doc["paths"][path][method]["requestBody"]["content"]["application/json"]["schema"]["$ref"]
        doc["components"]["schemas"][ref.rsplit("/", 1)[1]]["required"].append("extra_field")

    def cookie_name(doc):
        doc["components"]["securitySchemes"]["cookieAuth"]["name"] = "session"

    def status_code(doc):
        doc["paths"][path][method]["responses"]["409"] = doc["paths"][path][method]["responses"]["403"]

    return [
        operation_id,
        scope,
        drop_media_type,
        error_enum,
        field_error_description,
        request_required,
        cookie_name,
        status_code,
    ]


@pytest.mark.parametrize("spec_file", SPEC_FILES)
def test_harness_reports_each_injected_difference(spec_file):
    spec = load_spec(spec_file)
    for alter in _alterations(spec):
        altered = copy.deepcopy(spec)
        alter(altered)
        differences = contract_differences(spec, altered)
        assert differences, f"{alter.__name__} went unnoticed"
        assert "spec:" in report(differences)


def test_harness_folds_whitespace_in_descriptions_only():
    assert compare({"description": "a  b\nc"}, {"description": "a b c"}) == []
    assert compare({"title": "a  b"}, {"title": "a b"}) != []


def test_harness_detects_injected_difference_against_generated_schema(generated):
    spec = load_spec("evaluation-results-upsert.yaml")
    spec["components"]["schemas"]["ErrorResponse"]["required"] = ["detail", "code"]
    assert shared_components_differences(spec, generated), "altered ErrorResponse went unnoticed"
