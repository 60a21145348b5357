"""Inventory writes that are not declared as code: satellite credentials and heartbeats."""

from __future__ import annotations

from dataclasses import dataclass

from django.contrib.auth.models import AbstractBaseUser
from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils import timezone
from oauth2_provider.generators import generate_client_secret
from oauth2_provider.models import AccessToken, Application, RefreshToken
from oauth2_provider.settings import oauth2_settings

from fleet.core.permissions import scope_needs, scope_usable
from fleet.inventory.models import OperatorCredential, Satellite, SatelliteCredential


@dataclass(frozen=True)
class IssuedCredential:
    client_id: str
    client_secret: str
    rotated: bool


def _client_issue(existing: Application | None, **create: object) -> tuple[Application, IssuedCredential]:
    """Create a client-credentials client, or rotate an existing one's secret and revoke its
    tokens. The secret is stored hashed: the returned value is the only time it is visible."""
    secret = generate_client_secret()
    if existing is None:
        application = Application.objects.create(
            client_type=Application.CLIENT_CONFIDENTIAL,
            authorization_grant_type=Application.GRANT_CLIENT_CREDENTIALS,
            client_secret=secret,
            hash_client_secret=True,
            **create,
        )
        return application, IssuedCredential(application.client_id, secret, rotated=False)
    existing.client_secret = secret
    existing.save()
    RefreshToken.objects.filter(application=existing).delete()
    AccessToken.objects.filter(application=existing).delete()
    return existing, IssuedCredential(existing.client_id, secret, rotated=True)


@transaction.atomic
def satellite_credentials_issue(*, satellite: Satellite) -> IssuedCredential:
    """Create the satellite's OAuth2 client (bound to it), or rotate its secret."""
    credential = SatelliteCredential.objects.select_related("application").filter(satellite=satellite).first()
    application, issued = _client_issue(
        credential.application if credential else None, name=f"satellite {satellite.site.slug}/{satellite.name}"
    )
    if credential is None:
        SatelliteCredential.objects.create(satellite=satellite, application=application)
    return issued


@transaction.atomic
def operator_credentials_issue(*, name: str, owner: AbstractBaseUser, scopes: list[str]) -> IssuedCredential:
    """Create or rotate an automation client owned by a person, for `scopes`. Refuses (400 on
    `scope`) a scope the owner could not use: its tokens act with at most the owner's
    permissions, and only while the owner is active."""
    known = list(oauth2_settings.SCOPES)
    problems = []
    for scope in scopes:
        if scope not in known:
            problems.append(f"{scope}: no such scope (known: {', '.join(known)}).")
        elif not scope_usable(scope, owner):
            needs = " or ".join("+".join(p) for p in scope_needs(scope)) or "a permission no operation grants"
            problems.append(f"{scope}: {owner.get_username()} holds none of the permission sets it needs ({needs}).")
    if problems:
        raise ValidationError({"scope": problems})
    existing = Application.objects.filter(name=name, user=owner).exclude(satellite_credential__isnull=False).first()
    application, issued = _client_issue(existing, name=name, user=owner)
    OperatorCredential.objects.update_or_create(application=application, defaults={"scopes": sorted(set(scopes))})
    return issued


@transaction.atomic
def satellite_heartbeat_record(
    *, satellite: Satellite, workflows: list[dict[str, str]], agent_version: str = ""
) -> Satellite:
    """Remember what the satellite's agent can run, and that it is alive."""
    satellite.advertised_workflows = sorted(
        ({"name": w["name"], "version": str(w.get("version", ""))} for w in workflows), key=lambda w: w["name"]
    )
    satellite.agent_version = agent_version
    satellite.last_seen_at = timezone.now()
    satellite.save(update_fields=["advertised_workflows", "agent_version", "last_seen_at", "updated_at"])
    return satellite
