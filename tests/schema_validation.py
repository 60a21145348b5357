"""Every API response a test receives is checked against the service's own generated OpenAPI
schema: a status the operation does not document, or a body that does not match what it
documents for that status, fails the test that produced it (not only the fuzz run).

Statuses that any operation can answer without listing them — the transport's own (405, 406,
415), throttling (429) and an unavailable database (503) — are documented once, in docs/api.md;
their bodies must still be the uniform `ErrorResponse`.
"""

from __future__ import annotations

import functools
import json
from typing import Any

import requests
import schemathesis
from django.http import HttpResponse
from drf_spectacular.generators import SchemaGenerator
from drf_spectacular.renderers import OpenApiJsonRenderer
from rest_framework.test import APIClient
from schemathesis.core.failures import FailureGroup
from schemathesis.core.transport import Response as SchemathesisResponse

#: Answered by any operation and documented once (docs/api.md, "Errors"), never per operation.
TRANSPORT_STATUSES = frozenset({405, 406, 408, 411, 413, 414, 415, 429, 503})
ERROR_BODY_KEYS = {"detail", "code", "field_errors"}


@functools.cache
def generated_schema() -> Any:
    """The schema `/api/schema/` serves, generated once per test session, with every object that
    lists its properties closed (`additionalProperties: false`), so that a response field the
    schema does not document fails too."""
    raw = json.loads(OpenApiJsonRenderer().render(SchemaGenerator().get_schema(request=None, public=True)))
    return schemathesis.openapi.from_dict(closed(raw))


def closed(node: Any) -> Any:
    """`node` with `additionalProperties: false` on every schema that names its properties."""
    if isinstance(node, list):
        return [closed(item) for item in node]
    if not isinstance(node, dict):
        return node
    result = {key: closed(value) for key, value in node.items()}
    if isinstance(result.get("properties"), dict) and "additionalProperties" not in result:
        result["additionalProperties"] = False
    return result


def _as_schemathesis(method: str, path: str, response: HttpResponse) -> SchemathesisResponse:
    request = requests.Request(method=method, url=f"http://testserver{path}").prepare()
    return SchemathesisResponse(
        status_code=response.status_code,
        headers={name: [value] for name, value in response.items()},
        content=response.content,
        request=request,
        elapsed=0.0,
        verify=False,
    )


def check_response(method: str, path: str, response: HttpResponse, *, server_error_expected: bool = False) -> None:
    """Fail (AssertionError) unless `response` is what the schema documents for this request."""
    if not path.startswith("/api/v1/"):
        return  # the token endpoint, the schema itself, the admin: not API operations
    status = response.status_code
    if status >= 500 and status != 503 and not server_error_expected:
        raise AssertionError(f"{method} {path} answered {status}: {response.content[:300]!r}")
    if status >= 400:
        body = json.loads(response.content)
        assert set(body) == ERROR_BODY_KEYS, f"{method} {path} {status}: not an ErrorResponse: {body}"
    operation = generated_schema().find_operation_by_path(method, path)
    if operation is None:
        # An unknown URL or method under /api/: only the uniform 404/405 may come back.
        assert status in {404, 405}, f"{method} {path} is no documented operation, yet answered {status}"
        return
    if status in TRANSPORT_STATUSES or status == 500:
        return
    documented = operation.definition.raw.get("responses", {})
    assert str(status) in documented, (
        f"{method} {operation.path} ({operation.definition.raw.get('operationId')}) answered {status}, "
        f"which it does not document (documented: {', '.join(sorted(documented))})"
    )
    try:
        operation.validate_response(_as_schemathesis(method, path, response))
    except (FailureGroup, AssertionError) as exc:  # one failure comes alone, several as a group
        raise AssertionError(f"{method} {path} {status}: the body does not match the schema:\n{exc}") from None


class ValidatingAPIClient(APIClient):
    """DRF's test client, checking every response against the generated schema. A test that
    provokes a 500 on purpose (an injected crash) says so with `server_error_expected = True`."""

    server_error_expected = False

    def request(self, **kwargs: Any) -> HttpResponse:
        response: HttpResponse = super().request(**kwargs)
        check_response(
            kwargs["REQUEST_METHOD"], kwargs["PATH_INFO"], response, server_error_expected=self.server_error_expected
        )
        return response
