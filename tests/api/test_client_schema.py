"""The JSON-only copy of /api/schema/ that client generators need (docs/api.md, "Integrating"):
every request body keeps only `application/json`, and the copy is a valid OpenAPI document."""

from __future__ import annotations

import copy

from openapi_spec_validator import validate

from tests.schema_validation import ValidatingAPIClient

JSON = "application/json"


def json_only(schema: dict) -> dict:
    """The schema with every request body reduced to its JSON content type (the form and multipart
    alternatives are what trip generators)."""
    copied = copy.deepcopy(schema)
    for operations in copied["paths"].values():
        for operation in operations.values():
            body = operation.get("requestBody") if isinstance(operation, dict) else None
            if body:
                body["content"] = {JSON: body["content"][JSON]}
    return copied


def test_the_json_only_copy_of_the_served_schema_is_valid_openapi(db):
    response = ValidatingAPIClient().get("/api/schema/?format=json")
    assert response.status_code == 200
    served = response.json()
    bodies = [op["requestBody"] for ops in served["paths"].values() for op in ops.values() if "requestBody" in op]
    assert any(len(body["content"]) == 3 for body in bodies), "the served schema offers JSON, form and multipart"

    copy_ = json_only(served)
    validate(copy_)  # raises on an invalid document
    copied = [op["requestBody"] for ops in copy_["paths"].values() for op in ops.values() if "requestBody" in op]
    assert len(copied) == len(bodies) and all(list(body["content"]) == [JSON] for body in copied)
    assert {op["operationId"] for ops in copy_["paths"].values() for op in ops.values()} == {
        op["operationId"] for ops in served["paths"].values() for op in ops.values()
    }
