"""Text PostgreSQL cannot store, refused where it enters: the URL.

A `text` value cannot hold NUL (U+0000), and a string holding a lone surrogate (U+D800–U+DFFF,
what a server decoding a path with `surrogateescape` hands over for bytes that are not UTF-8)
cannot even be encoded for the wire. Either, in a path parameter or a query parameter that reaches
a lookup, was a 500 with a traceback (psycopg's `DataError`). `StorableTextMiddleware` refuses them
for every view at once, before any view runs: in the path a 404 (no object is named by such a
string), in the query a 400 naming the parameter; the `ErrorResponse` under /api/, an HTML page
elsewhere. Nothing is logged but the request's own line (a 4xx: WARNING).
"""

from __future__ import annotations

import re
from collections.abc import Callable

from django.http import HttpRequest, HttpResponse, JsonResponse
from django.template import TemplateDoesNotExist, loader
from django.utils.html import escape

from fleet.core import requestlog
from fleet.core.error_schema import ErrorCode
from fleet.core.errors import error_body

UNSTORABLE = re.compile("[\x00\ud800-\udfff]")

NOT_FOUND_DETAIL = "Not found."
QUERY_DETAIL = "Query parameter {name!r} holds a NUL or a character that is not text; it cannot name anything."


def is_storable(text: str) -> bool:
    """Whether PostgreSQL's `text` can hold `text` (no NUL, no lone surrogate)."""
    return UNSTORABLE.search(text) is None


def unstorable_query_parameter(request: HttpRequest) -> str | None:
    """The first query parameter whose name or a value is not storable text, or None."""
    for name, values in request.GET.lists():
        if not is_storable(name) or not all(is_storable(v) for v in values):
            return name if is_storable(name) else repr(name)
    return None


class StorableTextMiddleware:
    """Refuses a request whose path or query holds text PostgreSQL cannot store (module doc).
    Placed after authentication so the dashboard's error page knows who is asking."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if not is_storable(request.path) or not is_storable(request.path_info):
            return _refusal(request, 404, NOT_FOUND_DETAIL, ErrorCode.NOT_FOUND, None)
        name = unstorable_query_parameter(request)
        if name is not None:
            return _refusal(request, 400, QUERY_DETAIL.format(name=name), ErrorCode.INVALID, name)
        return self.get_response(request)


def _refusal(request: HttpRequest, status: int, detail: str, code: ErrorCode, field: str | None) -> HttpResponse:
    requestlog.error_noted(code, request)
    if request.path.startswith("/api/"):
        fields = [{"field": field, "messages": [detail]}] if field else []
        return JsonResponse(error_body(detail, code, fields), status=status)
    try:
        template = loader.get_template(f"{status}.html")
    except TemplateDoesNotExist:
        return HttpResponse(f"<!doctype html><title>{status}</title><p>{escape(detail)}</p>", status=status)
    return HttpResponse(template.render({"message": detail}, request), status=status)
