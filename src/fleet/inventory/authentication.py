"""Bearer-token authentication (django-oauth-toolkit) that tells a bad token from no token and
hands views a `ClientPrincipal`."""

from __future__ import annotations

from typing import Any, NoReturn

from drf_spectacular.contrib.django_oauth_toolkit import DjangoOAuthToolkitScheme
from oauth2_provider.contrib.rest_framework import OAuth2Authentication
from rest_framework import exceptions
from rest_framework.request import Request

from fleet.core.throttling import auth_failures, client_address
from fleet.inventory.identity import ClientPrincipal


class BearerTokenAuthentication(OAuth2Authentication):
    """An `Authorization: Bearer …` header that does not verify is a 401 `authentication_failed`
    (DOT alone would fall through to the session and answer `not_authenticated`).

    Failures are counted per client address across processes: past `FLEET_THROTTLE_AUTH_FAILURES`
    a failing request is a 429 with `Retry-After` instead of a 401. Only failures are counted, so
    a good token costs nothing extra."""

    def authenticate(self, request: Request) -> tuple[ClientPrincipal, Any] | None:
        header = request.META.get("HTTP_AUTHORIZATION", "")
        if not header.lower().startswith("bearer"):
            return None
        result = super().authenticate(request)
        if result is None:
            self._failed(request, "The bearer token is invalid, expired or revoked.")
        user, token = result
        principal = ClientPrincipal(token=token, user=user)
        if principal.satellite is None and not (token.application.user_id and token.application.user.is_active):
            # Fail closed: e.g. the client of a satellite that was deleted keeps no power at all.
            self._failed(
                request, "This client is neither bound to a satellite nor owned by an active user; it may not act."
            )
        return principal, token

    def _failed(self, request: Request, detail: str) -> NoReturn:
        wait = auth_failures.hit(client_address(request))
        if wait:
            raise exceptions.Throttled(wait=wait, detail=f"Too many failed authentications; retry in {wait} s.")
        raise exceptions.AuthenticationFailed(detail)


class BearerTokenScheme(DjangoOAuthToolkitScheme):
    """Documents bearer auth as the spec's `oauth2` scheme with each view's scopes."""

    target_class = f"{__name__}.BearerTokenAuthentication"
    name = "oauth2"
