"""`/healthz`, `/readyz` and `/metrics`: what load balancers, Kubernetes probes and Prometheus
ask (docs/operations.md, "Monitoring").

They are served by `ProbesMiddleware`, second in the middleware list, before host validation
(`ALLOWED_HOSTS`), the HTTPS redirect, sessions and CSRF: a probe or a scrape addresses a pod or
host by its IP, over plain HTTP. None is throttled.

* `/healthz`: the process answers (200, no database).
* `/readyz`: the database answers and every migration this code knows is applied (200), else a
  503 `ErrorResponse` saying which (one query per probe).
* `/metrics`: the Prometheus text format (`fleet.core.metrics`), for callers whose address is in
  `FLEET_METRICS_ALLOW` (default loopback) or with a bearer token holding `fleet:metrics`; an
  operator's client also needs its owner to hold the view permissions of what the metrics reveal.
"""

from __future__ import annotations

import functools
import ipaddress
from collections.abc import Callable
from typing import Any

from django.conf import settings
from django.db import DatabaseError, connection
from django.db.migrations.loader import MigrationLoader
from django.db.migrations.recorder import MigrationRecorder
from django.http import HttpRequest, HttpResponse, JsonResponse
from rest_framework.request import Request
from rest_framework.views import APIView

from fleet.core import metrics
from fleet.core.error_schema import ErrorCode
from fleet.core.errors import error_body
from fleet.core.permissions import ScopeOrModelPermission
from fleet.core.throttling import client_address

METRICS_SCOPE = "fleet:metrics"


def healthz(request: HttpRequest) -> HttpResponse:
    return JsonResponse({"status": "ok"})


@functools.cache
def expected_migrations() -> frozenset[tuple[str, str]]:
    """The latest migration of every app, as this code has them (read from disk once)."""
    return frozenset(MigrationLoader(None, ignore_no_migrations=True).graph.leaf_nodes())


def readyz(request: HttpRequest) -> HttpResponse:
    expected = expected_migrations()
    try:
        applied = set(
            MigrationRecorder(connection)
            .migration_qs.filter(app__in={app for app, _ in expected})
            .values_list("app", "name")
        )
    except DatabaseError as exc:
        return _not_ready(f"The database is unavailable: {type(exc).__name__}.")
    missing = sorted(expected - applied)
    if missing:
        names = ", ".join(f"{app}.{name}" for app, name in missing)
        return _not_ready(f"Migrations not applied: {names}. Run `fleet migrate`.")
    return JsonResponse({"status": "ready"})


def _not_ready(detail: str) -> JsonResponse:
    response = JsonResponse(error_body(detail, ErrorCode.SERVICE_UNAVAILABLE), status=503)
    response["Retry-After"] = "5"
    return response


@functools.cache
def _allowed_networks() -> tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...]:
    return tuple(ipaddress.ip_network(entry, strict=False) for entry in settings.METRICS_ALLOW)


def address_allowed(address: str) -> bool:
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return False
    return any(ip in network for network in _allowed_networks())


class MetricsAccess(ScopeOrModelPermission):
    """An allowed address, or a bearer token with `fleet:metrics` (and, for an operator's client,
    an owner holding the permissions the metrics need). No person's session: it is not read here."""

    def has_permission(self, request: Request, view: Any) -> bool:
        if address_allowed(client_address(request)):
            return True
        return hasattr(request.auth, "scope") and super().has_permission(request, view)


class MetricsView(APIView):
    throttle_classes: list[Any] = []
    permission_classes = [MetricsAccess]
    required_scopes = [METRICS_SCOPE]

    @property
    def required_permissions(self) -> list[str]:
        return list(metrics.scrape_permissions())

    def get(self, request: Request) -> HttpResponse:
        body, content_type = metrics.exposition(request.META.get("HTTP_ACCEPT", ""))
        return HttpResponse(body, content_type=content_type)


_metrics_view = MetricsView.as_view()

#: Path → view, served whatever the host and scheme.
ROUTES: dict[str, Callable[[HttpRequest], HttpResponse]] = {
    "/healthz": healthz,
    "/readyz": readyz,
    "/metrics": _metrics_view,
}
PROBES = frozenset({"/healthz", "/readyz"})


class ProbesMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        view = ROUTES.get(request.path)
        if view is None:
            return self.get_response(request)
        request.served_as = request.path.strip("/")  # type: ignore[attr-defined]  # the operation label
        if request.method not in ("GET", "HEAD"):
            response: HttpResponse = JsonResponse(
                error_body(f"Method {request.method} is not allowed.", ErrorCode.METHOD_NOT_ALLOWED), status=405
            )
            response["Allow"] = "GET, HEAD"
            return response
        response = view(request)
        render = getattr(response, "render", None)
        if callable(render):  # a DRF response (an error from /metrics): URL routing would render it
            render()
        response.probe = request.path in PROBES and response.status_code == 200  # type: ignore[attr-defined]
        return response
