"""Rate limits per caller: anonymous callers by address, clients and people by identity.

Counts live in Django's cache (per process by default; point CACHES at a shared cache when
running several API processes)."""

from __future__ import annotations

from typing import Any

from rest_framework.request import Request
from rest_framework.settings import api_settings
from rest_framework.throttling import SimpleRateThrottle


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
            self.scope, ident = "anon", f"ip:{self.get_ident(request)}"
        self.rate = self.get_rate()
        if self.rate is None:
            return True
        self.num_requests, self.duration = self.parse_rate(self.rate)
        self.key = self.cache_format % {"scope": self.scope, "ident": ident}
        return super().allow_request(request, view)

    def get_cache_key(self, request: Request, view: Any) -> str | None:
        return self.key
