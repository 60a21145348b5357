"""The agent's HTTP client: OAuth2 client credentials, retries, and one method per endpoint.

Transient trouble (connection errors, 5xx, 429) is retried with jittered exponential backoff,
honouring `Retry-After`. Retried calls are idempotent on the server (executions are reported under
agent-chosen ids, results upserts and reconcile pages can be replayed); the one call that is not,
claim, is retried only when it surely did not take effect.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Callable
from typing import Any

import httpx

from fleet_agent import __version__, metrics

logger = logging.getLogger("fleet_agent.client")

RETRYABLE_STATUSES = {429, 500, 502, 503, 504}


JsonObject = dict[str, Any]


class ApiError(Exception):
    """A final (non-retryable, or retries exhausted) error answer from the service."""

    def __init__(self, status: int, body: Any, method: str, path: str) -> None:
        self.status = status
        self.body: JsonObject = body if isinstance(body, dict) else {"detail": str(body)}
        self.method, self.path = method, path
        detail = self.body.get("detail") or body
        super().__init__(f"{method} {path}: {status} {detail}")

    @property
    def code(self) -> str | None:
        code = self.body.get("code")
        return None if code is None else str(code)

    def field_errors(self) -> dict[str, list[str]]:
        errors = self.body.get("field_errors") or []
        return {str(e["field"]): list(e["messages"]) for e in errors if isinstance(e, dict)}


class Unreachable(Exception):
    """The service could not be reached after every retry."""


class FleetClient:
    def __init__(
        self,
        api: str,
        client_id: str,
        client_secret: str,
        *,
        timeout: float = 30.0,
        max_retries: int = 6,
        transport: httpx.BaseTransport | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self._http = httpx.Client(
            base_url=api.rstrip("/"),
            timeout=timeout,
            transport=transport,
            headers={"User-Agent": f"fleet-agent/{__version__}", "Accept": "application/json"},
        )
        self._client_id, self._client_secret = client_id, client_secret
        self._token: str | None = None
        self._token_expires = 0.0
        self._token_lock = threading.Lock()
        self.max_retries = max_retries
        self._sleep = sleep

    def close(self) -> None:
        self._http.close()

    # --- tokens ---------------------------------------------------------------------------------

    def _fresh_token(self, force: bool = False) -> str:
        """A valid access token, fetched again a minute before the current one expires."""
        with self._token_lock:
            if force or self._token is None or time.monotonic() > self._token_expires - 60:
                response = self._send(
                    "POST",
                    "/o/token/",
                    data={"grant_type": "client_credentials"},
                    auth=(self._client_id, self._client_secret),
                    authenticate=False,
                )
                if response.status_code != 200:
                    raise ApiError(response.status_code, _body(response), "POST", "/o/token/")
                body = response.json()
                self._token = body["access_token"]
                self._token_expires = time.monotonic() + float(body.get("expires_in", 3600))
            return self._token

    # --- transport ------------------------------------------------------------------------------

    def _send(
        self, method: str, path: str, *, authenticate: bool = True, idempotent: bool = True, **kwargs: Any
    ) -> httpx.Response:
        """Send with retries. A call that is not idempotent is retried only when it surely did not
        take effect: the connection was never made, or the service refused it (429, or 503 when
        its database was unreachable)."""
        attempt = 0
        while True:
            attempt += 1
            headers = dict(kwargs.pop("headers", {}) or {})
            if authenticate:
                headers["Authorization"] = f"Bearer {self._fresh_token()}"
            try:
                response = self._http.request(method, path, headers=headers, **kwargs)
            except httpx.TransportError as exc:
                never_sent = isinstance(exc, (httpx.ConnectError, httpx.ConnectTimeout))
                if attempt > self.max_retries or not (idempotent or never_sent):
                    raise Unreachable(f"{method} {path}: {exc}") from exc
                metrics.RETRIES.labels("connection").inc()
                self._backoff(attempt, None, f"{type(exc).__name__}: {exc}", method, path)
                continue
            if response.status_code < 500 and response.status_code != 429:
                metrics.LAST_CONTACT.set_to_current_time()
            if response.status_code == 401 and authenticate and attempt == 1:
                self._fresh_token(force=True)  # revoked or expired early: fetch a new one once
                continue
            retryable = RETRYABLE_STATUSES if idempotent else {429, 503}
            if response.status_code in retryable and attempt <= self.max_retries:
                metrics.RETRIES.labels(str(response.status_code)).inc()
                self._backoff(attempt, response.headers.get("Retry-After"), str(response.status_code), method, path)
                continue
            return response

    def _backoff(self, attempt: int, retry_after: str | None, why: str, method: str, path: str) -> None:
        if retry_after is not None:
            try:
                delay = max(0.0, float(retry_after))
            except ValueError:
                delay = 1.0
        else:
            delay = min(30.0, 0.5 * 2 ** (attempt - 1)) * random.uniform(0.5, 1.0)
        logger.warning("retrying %s %s in %.1fs (attempt %d): %s", method, path, delay, attempt, why)
        self._sleep(delay)

    def request(self, method: str, path: str, **kwargs: Any) -> Any:
        response = self._send(method, path, **kwargs)
        if response.status_code >= 400:
            raise ApiError(response.status_code, _body(response), method, path)
        return response.json() if response.content else None

    # --- endpoints ------------------------------------------------------------------------------

    def heartbeat(self, site: str, satellite: str, workflows: list[dict[str, str]], agent_version: str) -> Any:
        return self.request(
            "POST",
            "/api/v1/satellites/heartbeat/",
            json={
                "site_slug": site,
                "satellite_name": satellite,
                "workflows": workflows,
                "agent_version": agent_version,
            },
        )

    def resource_classes(self, site: str, satellite: str) -> list[str]:
        return self.satellite_classes(site, satellite)[0]

    def satellite_classes(self, site: str, satellite: str) -> tuple[list[str], dict[str, str]]:
        """The satellite's resource classes, and each one's GPU vendor as its policy declares it."""
        body = _object(
            self.request(
                "GET", "/api/v1/satellites/resource-classes/", params={"site_slug": site, "satellite_name": satellite}
            )
        )
        vendors = body.get("gpu_vendors")
        vendors = vendors if isinstance(vendors, dict) else {}
        return [str(rc) for rc in body["resource_classes"]], {str(k): str(v) for k, v in vendors.items()}

    def claim(self, site: str, satellite: str, capacity: int) -> list[JsonObject]:
        """Not idempotent (a lost answer leaves jobs leased to nobody until their lease expires),
        so never retried when it may have taken effect."""
        body = self.request(
            "POST",
            "/api/v1/jobs/claim/",
            idempotent=False,
            json={"site_slug": site, "satellite_name": satellite, "capacity": capacity},
        )
        jobs: list[JsonObject] = _object(body)["jobs"]
        return jobs

    def job_heartbeat(self, job_id: str) -> JsonObject:
        return _object(self.request("POST", f"/api/v1/jobs/{job_id}/heartbeat/"))

    def finish_job(self, job_id: str, status: str, reason: str = "") -> JsonObject:
        return _object(
            self.request("POST", f"/api/v1/jobs/{job_id}/finish/", json={"status": status, "reason": reason})
        )

    def get_execution(self, execution_id: str) -> JsonObject | None:
        try:
            return _object(self.request("GET", f"/api/v1/burn-in/executions/{execution_id}/"))
        except ApiError as exc:
            if exc.status == 404:
                return None
            raise

    def report_execution(self, execution_id: str, body: JsonObject) -> JsonObject:
        return _object(self.request("PUT", f"/api/v1/burn-in/executions/{execution_id}/", json=body))

    def pending_evaluations(self, site: str, satellite: str, limit: int, cursor: str | None) -> JsonObject:
        params: dict[str, str | int] = {"site_slug": site, "satellite_name": satellite, "limit": limit}
        if cursor:
            params["cursor"] = cursor
        return _object(self.request("GET", "/api/v1/burn-in/evaluations/pending/", params=params))

    def upsert_results(self, results: list[JsonObject]) -> JsonObject:
        return _object(self.request("POST", "/api/v1/burn-in/evaluations/results/", json={"results": results}))

    def reconcile(self, site: str, satellite: str, resource_class: str, limit: int, cursor: str | None) -> JsonObject:
        return _object(
            self.request(
                "POST",
                "/api/v1/burn-in/policy-progress/reconcile/",
                json={
                    "site_slug": site,
                    "satellite_name": satellite,
                    "resource_class": resource_class,
                    "limit": limit,
                    "cursor": cursor,
                },
            )
        )

    def node_states(self, site: str, satellite: str, limit: int, cursor: str | None) -> JsonObject:
        """One page of the satellite's devices with their lifecycle states (the node gate's read)."""
        params: dict[str, str | int] = {"site_slug": site, "satellite_name": satellite, "limit": limit}
        if cursor:
            params["cursor"] = cursor
        return _object(self.request("GET", "/api/v1/satellites/node-states/", params=params))

    def report_fingerprints(self, site: str, satellite: str, devices: list[JsonObject]) -> JsonObject:
        """The inventory sweep's report: `{hostname, inventory}` of up to 100 of the satellite's devices."""
        body = {"site_slug": site, "satellite_name": satellite, "devices": devices}
        return _object(self.request("POST", "/api/v1/satellites/fingerprints/", json=body))


class UnexpectedBody(Exception):
    """The service answered 2xx with something other than the JSON object its schema documents."""


def _object(body: Any) -> JsonObject:
    if not isinstance(body, dict):
        raise UnexpectedBody(f"expected a JSON object, got {type(body).__name__}")
    return body


def _body(response: httpx.Response) -> Any:
    try:
        return response.json()
    except ValueError:
        return response.text[:500]
