"""One error path: every exception under /api/ becomes the spec's `ErrorResponse` body.

`{"detail": str, "code": ErrorCode, "field_errors": [{"field": "results.3.execution_id",
"messages": [...]}]}`. Services raise Django `ValidationError` (with dotted-path keys) or a
`FleetError`; DRF raises its own exceptions; the database going away becomes a 503.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Iterator
from typing import Any

from django.core.exceptions import PermissionDenied as DjangoPermissionDenied
from django.core.exceptions import RequestDataTooBig, SuspiciousOperation, TooManyFieldsSent, TooManyFilesSent
from django.core.exceptions import ValidationError as DjangoValidationError
from django.db import DatabaseError, InterfaceError, OperationalError
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.views import csrf as django_csrf
from django.views import defaults
from django.views.decorators.csrf import csrf_exempt
from rest_framework import exceptions, status
from rest_framework.response import Response
from rest_framework.serializers import as_serializer_error
from rest_framework.settings import api_settings
from rest_framework.views import set_rollback

from fleet.core import metrics, requestlog
from fleet.core.error_schema import ErrorCode
from fleet.core.exceptions import FleetError

logger = logging.getLogger("fleet.errors")


SAFE_500_DETAIL = "The server hit an unexpected error; it has been logged."
DB_UNAVAILABLE_DETAIL = "The database is unavailable; retry later."

_DRF_CODES = {
    exceptions.ParseError: ErrorCode.PARSE_ERROR,
    exceptions.AuthenticationFailed: ErrorCode.AUTHENTICATION_FAILED,
    exceptions.NotAuthenticated: ErrorCode.NOT_AUTHENTICATED,
    exceptions.PermissionDenied: ErrorCode.PERMISSION_DENIED,
    exceptions.NotFound: ErrorCode.NOT_FOUND,
    exceptions.MethodNotAllowed: ErrorCode.METHOD_NOT_ALLOWED,
    exceptions.NotAcceptable: ErrorCode.NOT_ACCEPTABLE,
    exceptions.UnsupportedMediaType: ErrorCode.UNSUPPORTED_MEDIA_TYPE,
    exceptions.Throttled: ErrorCode.THROTTLED,
    exceptions.ValidationError: ErrorCode.INVALID,
}


def error_body(detail: str, code: str, field_errors: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    return {"detail": str(detail), "code": str(code), "field_errors": field_errors or []}


def flatten_field_errors(detail: Any, prefix: str = "") -> Iterator[tuple[str, list[str]]]:
    """Walk DRF's nested error structure, yielding (dotted path, messages).

    Dict keys become path segments, list rows become indices; a row's own `non_field_errors`
    are reported on the row path (`results.3`).
    """
    if isinstance(detail, dict):
        for key, value in detail.items():
            if key == api_settings.NON_FIELD_ERRORS_KEY:
                yield from flatten_field_errors(value, prefix)
            else:
                yield from flatten_field_errors(value, f"{prefix}.{key}" if prefix else str(key))
    elif isinstance(detail, list):
        if all(isinstance(item, str) for item in detail):
            if detail:
                yield prefix, [str(item) for item in detail]
            return
        for index, item in enumerate(detail):
            if isinstance(item, str):
                yield prefix, [str(item)]
            elif item:
                yield from flatten_field_errors(item, f"{prefix}.{index}" if prefix else str(index))
    elif detail not in (None, ""):
        yield prefix, [str(detail)]


def validation_error_body(detail: Any) -> dict[str, Any]:
    merged: dict[str, list[str]] = {}
    for path, messages in flatten_field_errors(detail):
        merged.setdefault(path, []).extend(messages)
    general = merged.pop("", [])
    field_errors = [{"field": path, "messages": messages} for path, messages in merged.items()]
    if general:
        message = " ".join(general)
    elif len(field_errors) == 1:
        only = field_errors[0]
        message = f"Invalid input: {only['field']}: {only['messages'][0]}"
    else:
        message = f"Invalid input in {len(field_errors)} fields; see field_errors."
    return error_body(message, ErrorCode.INVALID, field_errors)


def _is_database_unavailable(exc: BaseException) -> bool:
    if isinstance(exc, (OperationalError, InterfaceError)):
        return True
    # psycopg raises its own OperationalError when a connection cannot even be opened.
    return type(exc).__module__.startswith("psycopg") and type(exc).__name__ == "OperationalError"


def exception_handler(exc: Exception, context: dict[str, Any]) -> Response:
    """DRF's EXCEPTION_HANDLER: every exception becomes an `ErrorResponse` (its code goes on the
    request's log line)."""
    set_rollback()
    response = _error_response(exc)
    request = context.get("request")
    requestlog.error_noted(response.data["code"], getattr(request, "_request", None))
    return response


def _error_response(exc: Exception) -> Response:
    headers: dict[str, str] = {}
    if isinstance(exc, DjangoValidationError):
        exc = exceptions.ValidationError(as_serializer_error(exc))
    elif isinstance(exc, Http404):
        exc = exceptions.NotFound()
    elif isinstance(exc, DjangoPermissionDenied):
        exc = exceptions.PermissionDenied()

    refused = _suspicious_refusal(exc)
    if refused is not None:
        return Response(error_body(refused[1], ErrorCode.INVALID), status=refused[0])

    if isinstance(exc, FleetError):
        fields = [{"field": f, "messages": m} for f, m in exc.field_errors.items()]
        return Response(error_body(exc.detail, exc.code, fields), status=exc.status_code)

    if isinstance(exc, exceptions.APIException):
        auth_header, wait = getattr(exc, "auth_header", None), getattr(exc, "wait", None)
        if auth_header:
            headers["WWW-Authenticate"] = auth_header
        if wait:
            headers["Retry-After"] = str(int(wait))
        if isinstance(exc, exceptions.ValidationError):
            body = validation_error_body(exc.detail)
        else:
            code = next(
                (c for cls, c in _DRF_CODES.items() if isinstance(exc, cls)),
                ErrorCode.ERROR if exc.status_code >= 500 else ErrorCode.INVALID,
            )
            fields = [{"field": f, "messages": m} for f, m in getattr(exc, "field_errors", {}).items()]
            body = error_body(_plain_detail(exc.detail), code, fields)
        return Response(body, status=exc.status_code, headers=headers)

    if _is_database_unavailable(exc):
        logger.error("database unavailable: %s", exc)
        metrics.database_unavailable_counted()
        return Response(
            error_body(DB_UNAVAILABLE_DETAIL, ErrorCode.SERVICE_UNAVAILABLE),
            status=status.HTTP_503_SERVICE_UNAVAILABLE,
            headers={"Retry-After": "5"},
        )
    if isinstance(exc, DatabaseError):
        logger.exception("database error")
    else:
        logger.exception("unhandled error")
    return Response(error_body(SAFE_500_DETAIL, ErrorCode.ERROR), status=500)


def _suspicious_refusal(exc: BaseException | None) -> tuple[int, str] | None:
    """What Django's own request limits raise while a body is decoded, as (status, detail)."""
    if isinstance(exc, RequestDataTooBig):
        return 413, "The request body is larger than the service accepts."
    if isinstance(exc, TooManyFieldsSent):
        return 400, "The request has more fields than the service accepts."
    if isinstance(exc, TooManyFilesSent):
        return 400, "The request has more files than the service accepts."
    if isinstance(exc, SuspiciousOperation):
        return 400, "Bad request."
    return None


def _plain_detail(detail: Any) -> str:
    if isinstance(detail, dict):
        detail = detail.get("detail", next(iter(detail.values()), ""))
    if isinstance(detail, list):
        detail = " ".join(str(d) for d in detail)
    return str(detail)


# --- Django-level handlers for what never reaches DRF (URL resolution, middleware) ---------------


def _is_api(request: HttpRequest) -> bool:
    return request.path.startswith("/api/")


@csrf_exempt  # an unknown URL is a 404 whatever the method, not a CSRF failure
def api_not_found(request: HttpRequest, *args: Any, **kwargs: Any) -> JsonResponse:
    return JsonResponse(error_body("Not found.", ErrorCode.NOT_FOUND), status=404)


def csrf_failure(request: HttpRequest, reason: str = "") -> HttpResponse:
    """CSRF_FAILURE_VIEW: the uniform body under /api/, Django's page elsewhere."""
    if _is_api(request):
        return JsonResponse(error_body(f"CSRF Failed: {reason}", ErrorCode.PERMISSION_DENIED), status=403)
    return django_csrf.csrf_failure(request, reason=reason)


def handler404(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    if _is_api(request):
        return api_not_found(request)
    return defaults.page_not_found(request, exception or Http404())


def handler400(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    if _is_api(request):
        status, detail = _suspicious_refusal(exception) or (400, "Bad request.")
        return JsonResponse(error_body(detail, ErrorCode.INVALID), status=status)
    return defaults.bad_request(request, exception or SuspiciousOperation())


def handler403(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    if _is_api(request):
        return JsonResponse(error_body("Permission denied.", ErrorCode.PERMISSION_DENIED), status=403)
    return defaults.permission_denied(request, exception or DjangoPermissionDenied())


def database_unavailable_response(request: HttpRequest) -> HttpResponse:
    """503 `service_unavailable` with `Retry-After`, the `ErrorResponse` on every path (as before:
    a page cannot be rendered without the database anyway)."""
    metrics.database_unavailable_counted()
    response = JsonResponse(error_body(DB_UNAVAILABLE_DETAIL, ErrorCode.SERVICE_UNAVAILABLE), status=503)
    response["Retry-After"] = "5"
    return response


class DatabaseUnavailableMiddleware:
    """Views outside DRF (the dashboard, the login page, the admin) reach the database too. There a
    database that is gone, or a statement cancelled by a timeout, answers 503 with `Retry-After`
    as under /api/, with one log line: without this Django takes its uncaught-exception path,
    which logs a full traceback for every such request (found by tests/reliability/test_faults.py)."""

    def __init__(self, get_response: Any) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response: HttpResponse = self.get_response(request)
        return response

    def process_exception(self, request: HttpRequest, exception: Exception) -> HttpResponse | None:
        if not _is_database_unavailable(exception):
            return None
        logger.error("database unavailable: %s", exception)
        requestlog.error_noted(ErrorCode.SERVICE_UNAVAILABLE, request)
        return database_unavailable_response(request)


def handler500(request: HttpRequest) -> HttpResponse:
    exc = sys.exc_info()[1]
    if exc is not None and _is_database_unavailable(exc):
        return database_unavailable_response(request)
    if _is_api(request):
        return JsonResponse(error_body(SAFE_500_DETAIL, ErrorCode.ERROR), status=500)
    return defaults.server_error(request)
