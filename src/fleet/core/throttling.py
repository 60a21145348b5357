"""Rate limits.

* `ClientRateThrottle` (DRF, every API view): anonymous callers by address, clients and people by
  identity; counted per process (Django's `default` cache), a courtesy limit.
* `Limiter`s that protect, counted across every process in the `shared` cache: failed bearer
  authentications per client address (`auth_failures`), and token requests per address and per
  client id (`token_requests_*`), checked before the token endpoint hashes a secret. Each is DRF's
  own fixed-window arithmetic (`SimpleRateThrottle.parse_rate`) over a cache counter.

The client address is the peer's, or the trusted proxy's X-Forwarded-For entry when
`FLEET_TRUSTED_PROXY` is on (`NUM_PROXIES`); django-axes counts login failures by the same address.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.core.cache import caches
from django.http import HttpRequest
from rest_framework.request import Request
from rest_framework.settings import api_settings
from rest_framework.throttling import BaseThrottle, SimpleRateThrottle


def client_address(request: HttpRequest | Request) -> str:
    """The caller's address as every throttle counts it."""
    return BaseThrottle().get_ident(request) or ""  # type: ignore[arg-type]  # reads only META


def login_address(request: HttpRequest, *args: Any, **kwargs: Any) -> str | None:
    """django-axes' AXES_CLIENT_IP_CALLABLE: the same address (None for an in-process login)."""
    return client_address(request) or None


class ClientRateThrottle(SimpleRateThrottle):
    scope = "client"

    def get_rate(self) -> str | None:
        rate = api_settings.DEFAULT_THROTTLE_RATES.get(self.scope)
        return None if rate is None else str(rate)

    def allow_request(self, request: Request, view: Any) -> bool:
        application_id = getattr(request.auth, "application_id", None)
        user = request.user
        if application_id is not None:
            self.scope, ident = "client", f"app:{application_id}"
        elif user is not None and user.is_authenticated:
            self.scope, ident = "client", f"user:{user.pk}"
        else:
            self.scope, ident = "anon", f"ip:{client_address(request)}"
        self.rate = self.get_rate()
        if self.rate is None:
            return True
        self.num_requests, self.duration = self.parse_rate(self.rate)
        self.key = self.cache_format % {"scope": self.scope, "ident": ident}
        return super().allow_request(request, view)

    def get_cache_key(self, request: Request, view: Any) -> str | None:
        return self.key


@dataclass(frozen=True)
class Limiter:
    """A fixed-window counter per key in the shared cache: `hit` counts one event, `wait` says
    how many seconds remain until the key may act again (0 while under the limit)."""

    name: str
    setting: str

    def _rate(self) -> tuple[int, int]:
        num, duration = SimpleRateThrottle.parse_rate(None, settings.THROTTLES[self.setting])  # type: ignore[arg-type]
        return int(num or 0), int(duration or 1)

    def _key(self, key: str) -> str:
        num, duration = self._rate()
        window = int(time.time() // duration)
        return f"fleet-throttle:{self.name}:{key}:{window}"

    def wait(self, key: str) -> int:
        num, duration = self._rate()
        count = caches["shared"].get(self._key(key), 0)
        if count < num:
            return 0
        return max(1, duration - int(time.time() % duration))

    def hit(self, key: str) -> int:
        """Count one event; the seconds to wait when that went over the limit, else 0."""
        num, duration = self._rate()
        cache = caches["shared"]
        cache_key = self._key(key)
        if cache.add(cache_key, 1, timeout=duration + 1):
            count = 1
        else:
            try:
                count = cache.incr(cache_key)
            except ValueError:  # expired between add and incr
                cache.set(cache_key, 1, timeout=duration + 1)
                count = 1
        return 0 if count <= num else max(1, duration - int(time.time() % duration))


auth_failures = Limiter("auth-failures", "AUTH_FAILURES")
token_requests_per_address = Limiter("token-address", "TOKEN_PER_ADDRESS")
token_requests_per_client = Limiter("token-client", "TOKEN_PER_CLIENT")
