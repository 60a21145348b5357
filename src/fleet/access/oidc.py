"""Signing people in with the company's OpenID Connect provider (Okta, Entra ID, Google, Keycloak…)
through Authlib's Django client: the authorization code flow with PKCE (S256), the provider's
discovery document and keys, `state` and `nonce` checked, the ID token's signature, issuer, audience
and expiry verified. The person's role comes from the provider's groups claim at every sign-in
(`fleet.access.roles.role_for_groups`): removed from the group, they lose the role at the next
sign-in; in no mapped group, they have no role. Settings: docs/oidc.md.

A sign-in the provider or the checks refuse is a 400 page saying why, and signs nobody in."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from authlib.integrations.base_client.errors import OAuthError
from authlib.integrations.django_client import OAuth
from django.conf import settings
from django.contrib.auth import get_user_model, login
from django.contrib.auth.views import LoginView
from django.db import transaction
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils import timezone
from django.utils.http import url_has_allowed_host_and_scheme
from django.views import View
from joserfc.errors import JoseError

from fleet.access.backends import password_login_mode
from fleet.access.models import OidcIdentity
from fleet.access.roles import person_role_set, role_for_groups

log = logging.getLogger("fleet.access.oidc")
NEXT = "fleet-oidc-next"
BACKEND = "fleet.access.backends.LocalPasswordBackend"


@dataclass(frozen=True)
class OidcSettings:
    issuer: str
    client_id: str
    client_secret: str
    scopes: str
    groups_claim: str
    role_groups: dict[str, tuple[str, ...]]
    name: str


def oidc_settings() -> OidcSettings | None:
    """The provider configured (`FLEET_OIDC_*`), or None: sign-in with passwords only."""
    raw = getattr(settings, "FLEET_OIDC", None) or {}
    if not raw.get("issuer") or not raw.get("client_id"):
        return None
    return OidcSettings(
        issuer=raw["issuer"].rstrip("/"),
        client_id=raw["client_id"],
        client_secret=raw.get("client_secret", ""),
        scopes=raw.get("scopes", "openid email profile groups"),
        groups_claim=raw.get("groups_claim", "groups"),
        role_groups=dict(raw.get("role_groups", {})),
        name=raw.get("name", "your identity provider"),
    )


_clients: dict[tuple[str, str, str, str], Any] = {}


def _client(config: OidcSettings) -> Any:
    """Authlib's client for the provider (its discovery document read on first use)."""
    key = (config.issuer, config.client_id, config.client_secret, config.scopes)
    if key not in _clients:
        oauth = OAuth()
        oauth.register(
            name="fleet",
            client_id=config.client_id,
            client_secret=config.client_secret,
            server_metadata_url=f"{config.issuer}/.well-known/openid-configuration",
            client_kwargs={"scope": config.scopes, "code_challenge_method": "S256", "timeout": 10},
        )
        _clients[key] = oauth.create_client("fleet")
    return _clients[key]


def refused(request: HttpRequest, why: str) -> HttpResponse:
    log.warning("OpenID Connect sign-in refused: %s", why)
    return render(request, "registration/oidc_refused.html", {"why": why}, status=400)


class OidcLogin(View):
    """Off to the provider (a 404 when none is configured)."""

    def get(self, request: HttpRequest) -> HttpResponse:
        config = oidc_settings()
        if config is None:
            return render(request, "404.html", {"message": "No identity provider is configured."}, status=404)
        wanted = request.GET.get("next", "/")
        safe = url_has_allowed_host_and_scheme(wanted, allowed_hosts={request.get_host()})
        request.session[NEXT] = wanted if safe else "/"
        client = _client(config)
        try:
            metadata = client.load_server_metadata()
        except Exception as exc:
            return refused(request, f"the provider's discovery document could not be read ({type(exc).__name__})")
        if str(metadata.get("issuer", "")).rstrip("/") != config.issuer:
            return refused(
                request, f"the provider says its issuer is {metadata.get('issuer')!r}, not {config.issuer!r}"
            )
        return client.authorize_redirect(request, request.build_absolute_uri(reverse("oidc-callback")))


class OidcCallback(View):
    """Back from the provider: check everything, find or make the person, set their role, sign in."""

    def get(self, request: HttpRequest) -> HttpResponse:
        config = oidc_settings()
        if config is None:
            return render(request, "404.html", {"message": "No identity provider is configured."}, status=404)
        if "error" in request.GET:
            return refused(request, f"the provider answered {request.GET.get('error')}")
        try:
            token = _client(config).authorize_access_token(request)
        except (OAuthError, JoseError, ValueError) as exc:
            return refused(request, f"{type(exc).__name__}: {exc}")
        claims = token.get("userinfo") or {}
        if str(claims.get("iss", "")).rstrip("/") != config.issuer or not claims.get("sub"):
            return refused(request, "the ID token names another issuer, or no subject")
        user = person_signed_in(config, claims)
        login(request, user, backend=BACKEND)
        return redirect(request.session.pop(NEXT, "/"))


@transaction.atomic
def person_signed_in(config: OidcSettings, claims: dict[str, Any]) -> Any:
    """The user bound to the token's (issuer, subject), made at the first sign-in (no usable
    password: they sign in through the provider), with the role their groups map to now."""
    identity = OidcIdentity.objects.select_related("user").filter(issuer=config.issuer, subject=claims["sub"]).first()
    if identity is None:
        User = get_user_model()
        wanted = str(claims.get("preferred_username") or claims.get("email") or claims["sub"])[:120]
        name = f"oidc:{wanted}"
        if User.objects.filter(username=name).exists():
            name = f"oidc:{claims['sub']}"[:150]
        user = User(username=name, email=str(claims.get("email", ""))[:254])
        user.set_unusable_password()
        user.save()
        identity = OidcIdentity.objects.create(issuer=config.issuer, subject=claims["sub"], user=user)
    user = identity.user
    groups = claims.get(config.groups_claim) or []
    if isinstance(groups, str):
        groups = [groups]
    person_role_set(user, role_for_groups([str(g) for g in groups], config.role_groups))
    identity.last_login_at = timezone.now()
    identity.save(update_fields=["last_login_at"])
    return user


class SignIn(LoginView):
    """Django's sign-in page, offering the provider when one is configured and the password form
    only while passwords may be used (`FLEET_PASSWORD_LOGIN`)."""

    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        context = super().get_context_data(**kwargs)
        config = oidc_settings()
        context["oidc_name"] = config.name if config else None
        context["password_login"] = password_login_mode()
        return context
