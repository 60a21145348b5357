"""How operations document their error responses: each view lists every status it answers in its
`@extend_schema(responses=…)`, error statuses through `error_responses`, all with the uniform
`ErrorResponse` body and, unless an operation words it otherwise, the spec's descriptions."""

from __future__ import annotations

import functools
from typing import Any

from django.conf import settings
from django.utils.decorators import method_decorator
from django.views.decorators.cache import cache_page
from drf_spectacular.utils import OpenApiResponse, extend_schema
from drf_spectacular.views import SpectacularAPIView

from fleet.core.error_schema import ERROR_DESCRIPTIONS

ERROR_REF = {"$ref": "#/components/schemas/ErrorResponse"}

#: What every list operation answers besides 200 (a bad filter or cursor is a 400).
LIST_ERRORS = (400, 401, 403)
#: What every retrieve-by-id operation answers besides 200.
RETRIEVE_ERRORS = (401, 403, 404)


def error_responses(*statuses: int, **worded: str) -> dict[int, OpenApiResponse]:
    """`{status: ErrorResponse}` for each status, described as the spec does, or as `worded`
    says (`error_responses(400, 404, not_found="Unknown site_id.")` — keys are `bad_request`,
    `unauthorized`, `forbidden`, `not_found`, `conflict`)."""
    names = {400: "bad_request", 401: "unauthorized", 403: "forbidden", 404: "not_found", 409: "conflict"}
    unknown = set(worded) - set(names.values())
    if unknown:
        raise TypeError(f"unknown error wording for {sorted(unknown)}")
    return {
        status: OpenApiResponse(response=ERROR_REF, description=worded.get(names[status], ERROR_DESCRIPTIONS[status]))
        for status in statuses
    }


def read_only_operations(serializer: Any, *, tags: list[str]) -> dict[str, Any]:
    """`@extend_schema_view(**read_only_operations(S, tags=…))` for a read-only viewset: list (a
    bad filter or cursor is a 400) and retrieve (an unknown id is a 404)."""
    return {
        "list": extend_schema(tags=tags, responses={200: serializer, **error_responses(*LIST_ERRORS)}),
        "retrieve": extend_schema(tags=tags, responses={200: serializer, **error_responses(*RETRIEVE_ERRORS)}),
    }


class CachedSchemaView(SpectacularAPIView):
    """`/api/schema/`: generating the document takes most of a second, so each process keeps the
    rendered document (per format) for `FLEET_SCHEMA_CACHE_SECONDS`; it only changes with the code."""

    @extend_schema(exclude=True)
    @method_decorator(cache_page(settings.SCHEMA_CACHE_SECONDS, key_prefix="schema"))
    def get(self, request, *args, **kwargs):
        return super().get(request, *args, **kwargs)


@functools.cache
def _operation_ids() -> dict[tuple[Any, str], str]:
    """`{(view callback, method): operationId}` for every documented operation, computed the way
    the schema computes it (drf-spectacular's own endpoint enumeration and `get_operation_id`),
    without generating the rest of the schema."""
    from drf_spectacular.generators import SchemaGenerator
    from drf_spectacular.settings import spectacular_settings

    generator = SchemaGenerator()
    generator._initialise_endpoints()
    found: dict[tuple[Any, str], str] = {}
    endpoints: list[Any] = list(generator.endpoints or [])
    for path, path_regex, method, callback in endpoints:
        view = generator.create_view(callback, method)
        view.request = spectacular_settings.GET_MOCK_REQUEST(method, path, view, None)
        schema = view.schema
        schema.path, schema.path_regex, schema.path_prefix, schema.method = (
            generator.coerce_path(path, method, view),
            path_regex,
            "^/",
            method.upper(),
        )
        if schema.is_excluded():
            continue
        found[(callback, method.upper())] = schema.get_operation_id()
    return found


def operation_ids_load() -> None:
    """Compute the operationId table now (a server does, before its first request)."""
    _operation_ids()


def operation_id(callback: Any, method: str) -> str | None:
    """The OpenAPI operationId of the operation `callback` (a resolved URL's view) serves for
    `method`, or None when it is no documented operation."""
    return _operation_ids().get((callback, method.upper()))
