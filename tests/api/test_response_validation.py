"""The everyday test clients refuse responses the schema does not document."""

from __future__ import annotations

import json

import pytest
from django.http import HttpResponse

from tests.schema_validation import check_response

SITE = "/api/v1/sites/0d6c5b0e-0000-4000-8000-000000000001/"
SITE_BODY = {
    "id": "0d6c5b0e-0000-4000-8000-000000000001",
    "slug": "lon-1",
    "name": "London 1",
    "created_at": "2026-12-01T10:00:00Z",
    "updated_at": "2026-12-01T10:00:00Z",
}
ERROR = {"detail": "Conflict.", "code": "conflict", "field_errors": []}


def answer(status: int, body: object) -> HttpResponse:
    return HttpResponse(json.dumps(body), status=status, content_type="application/json")


def test_a_documented_response_passes():
    check_response("GET", SITE, answer(200, SITE_BODY))
    check_response("GET", SITE, answer(404, ERROR | {"code": "not_found"}))


def test_an_undocumented_status_fails():
    with pytest.raises(AssertionError, match="answered 409, which it does not document"):
        check_response("GET", SITE, answer(409, ERROR))


def test_an_undocumented_field_fails():
    with pytest.raises(AssertionError, match="does not match the schema"):
        check_response("GET", SITE, answer(200, SITE_BODY | {"secret": "x"}))


def test_a_field_of_the_wrong_type_fails():
    with pytest.raises(AssertionError, match="does not match the schema"):
        check_response("GET", SITE, answer(200, SITE_BODY | {"slug": 7}))


def test_an_error_that_is_not_an_error_response_fails():
    with pytest.raises(AssertionError, match="not an ErrorResponse"):
        check_response("GET", SITE, answer(429, {"detail": "slow down"}))


def test_a_server_error_fails_unless_the_test_provoked_it():
    with pytest.raises(AssertionError, match="answered 500"):
        check_response("GET", SITE, answer(500, ERROR | {"code": "error"}))
    check_response("GET", SITE, answer(500, ERROR | {"code": "error"}), server_error_expected=True)
