"""Bearer-token authentication (django-oauth-toolkit) that tells a bad token from no token and
hands views a `ClientPrincipal`."""

from __future__ import annotations

from typing import Any

from drf_spectacular.contrib.django_oauth_toolkit import DjangoOAuthToolkitScheme
from oauth2_provider.contrib.rest_framework import OAuth2Authentication
from rest_framework import exceptions
from rest_framework.request import Request

from fleet.inventory.identity import ClientPrincipal


class BearerTokenAuthentication(OAuth2Authentication):
    """An `Authorization: Bearer …` header that does not verify is a 401 `authentication_failed`
    (DOT alone would fall through to the session and answer `not_authenticated`)."""

    def authenticate(self, request: Request) -> tuple[ClientPrincipal, Any] | None:
        header = request.META.get("HTTP_AUTHORIZATION", "")
        if not header.lower().startswith("bearer"):
            return None
        result = super().authenticate(request)
        if result is None:
            raise exceptions.AuthenticationFailed("The bearer token is invalid, expired or revoked.")
        user, token = result
        principal = ClientPrincipal(token=token, user=user)
        if principal.satellite is None and not (token.application.user_id and token.application.user.is_active):
            # Fail closed: e.g. the client of a satellite that was deleted keeps no power at all.
            raise exceptions.AuthenticationFailed(
                "This client is neither bound to a satellite nor owned by an active user; it may not act."
            )
        return principal, token


class BearerTokenScheme(DjangoOAuthToolkitScheme):
    """Documents bearer auth as the spec's `oauth2` scheme with each view's scopes."""

    target_class = f"{__name__}.BearerTokenAuthentication"
    name = "oauth2"
