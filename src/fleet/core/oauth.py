"""The OAuth2 endpoints machines use, and nothing else of django-oauth-toolkit's: the token
endpoint (client-credentials grant only, see `OAUTH2_SERVER_CLASS`) and token revocation. Clients
are managed in the admin (`oauth2_provider.add_application` and friends) or by the `fleet`
commands; no authorization, registration, device or introspection endpoint is routed.

Each token request costs a deliberately slow secret hash, so requests are counted per client
address and per client id before the secret is checked (429 with `Retry-After` past the limit).
"""

from __future__ import annotations

import base64
import binascii
from typing import Any

from django.http import HttpRequest, HttpResponse, JsonResponse
from django.urls import path
from oauth2_provider import views as oauth_views

from fleet.core.throttling import client_address, token_requests_per_address, token_requests_per_client


def _client_id(request: HttpRequest) -> str | None:
    header = request.META.get("HTTP_AUTHORIZATION", "")
    if header[:6].lower() == "basic ":
        try:
            return base64.b64decode(header[6:].strip(), validate=True).decode("utf-8").split(":", 1)[0] or None
        except (binascii.Error, UnicodeDecodeError):
            return None
    return request.POST.get("client_id") or None


def throttled_response(wait: int, detail: str) -> JsonResponse:
    """An OAuth2-style error body (RFC 6749 §5.2's shape) with status 429 and `Retry-After`."""
    response = JsonResponse({"error": "invalid_request", "error_description": detail}, status=429)
    response["Retry-After"] = str(wait)
    return response


class TokenView(oauth_views.TokenView):
    def post(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        wait = token_requests_per_address.hit(client_address(request))
        client_id = _client_id(request)
        if client_id is not None:
            wait = max(wait, token_requests_per_client.hit(client_id))
        if wait:
            return throttled_response(wait, f"Too many token requests from this address or client; retry in {wait} s.")
        return super().post(request, *args, **kwargs)


urlpatterns = [
    path("token/", TokenView.as_view(), name="token"),
    path("revoke_token/", oauth_views.RevokeTokenView.as_view(), name="revoke-token"),
]
