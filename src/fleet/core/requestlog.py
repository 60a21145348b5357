"""Each request's id, its log line and its metrics (docs/operations.md, "Logs").

`RequestObservationMiddleware` is the first middleware. It takes the request id from
`X-Request-ID` (what a proxy in front sent, when it is a plain token of at most 128 characters)
or makes one, echoes it in the response, and keeps it — with the operation and the principal
once they are known — in the context every log record of the request carries
(`fleet.core.logs`): the error path's lines (an `ErrorResponse` logged, a 500's traceback)
carry the same id as the request's own line. That line (logger `fleet.request`) says who asked
for which operation, the status and the duration; never a header, a token, a query string or a
body. Health probes are logged at DEBUG while they succeed.
"""

from __future__ import annotations

import logging
import re
import time
import uuid
from collections.abc import Callable
from typing import Any

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.utils.functional import SimpleLazyObject, empty

from fleet.core import metrics
from fleet.core.logs import RequestContext, request_context
from fleet.core.schema import operation_id

logger = logging.getLogger("fleet.request")

HEADER = "X-Request-ID"
_ACCEPTED_ID = re.compile(r"^[A-Za-z0-9._:@/+=-]{1,128}$")
#: Methods counted by name; anything else is `other` (a client cannot invent label values).
METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})
#: Requests that never reached a view (refused by a bound, or no URL matched).
UNMATCHED = "unmatched"
STATIC = "static"


def error_noted(code: str, request: HttpRequest | None) -> None:
    """The error path records the `ErrorResponse` code it answers with (for the request's line)
    and who was calling (for the lines it logs itself)."""
    context = request_context.get()
    if context is not None:
        context.error_code = str(code)
        if request is not None:
            context.principal = principal_of(request)


def request_id_of(value: str | None) -> str:
    """The proxy's id when it is a plain token, else a new one."""
    if value and _ACCEPTED_ID.match(value):
        return value
    return uuid.uuid4().hex


def operation_of(request: HttpRequest) -> str:
    """The OpenAPI operationId of the request's operation; for other pages, the URL's name."""
    served_as = getattr(request, "served_as", None)  # the probes, served before URL resolution
    if served_as is not None:
        return str(served_as)
    match = getattr(request, "resolver_match", None)
    if match is None:
        return STATIC if request.path.startswith(settings.STATIC_URL) else UNMATCHED
    return operation_id(match.func, request.method or "") or match.view_name


def principal_of(request: HttpRequest) -> str:
    """Who the request authenticated as, without making it authenticate: `satellite:<site>/<name>`,
    `client:<name>` (an operator's automation), `user:<username>` or `anonymous`."""
    user: Any = request.__dict__.get("user")
    if isinstance(user, SimpleLazyObject) and user._wrapped is empty:  # type: ignore[attr-defined]
        return "anonymous"  # nobody asked who it was: do not ask now (a query, maybe a dead database)
    try:
        if user is None or not user.is_authenticated:
            return "anonymous"
        describe = getattr(user, "principal_label", None)
        return str(describe()) if callable(describe) else f"user:{user.get_username()}"
    except Exception:  # a log line never fails a response
        return "unknown"


class RequestObservationMiddleware:
    """The first middleware: request id, the request's log line and its metrics."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        started = time.perf_counter()
        context = RequestContext(request_id=request_id_of(request.META.get("HTTP_X_REQUEST_ID")))
        token = request_context.set(context)
        try:
            response = self.get_response(request)
            seconds = time.perf_counter() - started
            context.operation = operation_of(request)
            context.principal = principal_of(request)
            response[HEADER] = context.request_id
            method = request.method if request.method in METHODS else "other"
            metrics.http_request_observed(
                operation=context.operation, method=method, status=response.status_code, seconds=seconds
            )
            self._log(request, response, context, seconds)
            # This line replaces Django's own (django.request) for the response; an exception's
            # traceback was logged where it was caught.
            response._has_been_logged = True  # type: ignore[attr-defined]
            return response
        finally:
            request_context.reset(token)

    def process_view(self, request: HttpRequest, *args: Any) -> None:
        """The URL is resolved: lines logged from here on name the operation."""
        context = request_context.get()
        if context is not None:
            context.operation = operation_of(request)

    def _log(self, request: HttpRequest, response: HttpResponse, context: RequestContext, seconds: float) -> None:
        status = response.status_code
        if status >= 500:
            level = logging.ERROR
        elif status >= 400:
            level = logging.WARNING
        elif getattr(response, "probe", False):
            level = logging.DEBUG
        else:
            level = logging.INFO
        _log_line(level, request.method or "", request.path, status, seconds, context.error_code)


def _log_line(level: int, method: str, path: str, status: int, seconds: float, error_code: str | None) -> None:
    logger.log(
        level,
        "%s %s %s %.1f ms",
        method,
        path,
        status,
        seconds * 1000,
        extra={
            "method": method,
            "path": path,
            "status": status,
            "duration_ms": round(seconds * 1000, 1),
            "error_code": error_code,
        },
    )


def refusal_observed(*, request_id: str, method: str, path: str, status: int, seconds: float, code: str) -> None:
    """A request `fleet serve` refused before Django saw it (a body too large or too slow):
    counted and logged like any other, as operation `unmatched`."""
    context = RequestContext(request_id=request_id, operation=UNMATCHED, principal="anonymous", error_code=code)
    token = request_context.set(context)
    try:
        metrics.http_request_observed(
            operation=UNMATCHED, method=method if method in METHODS else "other", status=status, seconds=seconds
        )
        _log_line(logging.WARNING, method, path, status, seconds, code)
    finally:
        request_context.reset(token)
