"""Inventory writes that are not declared as code: satellite credentials and heartbeats."""

from __future__ import annotations

from dataclasses import dataclass

from django.db import transaction
from django.utils import timezone
from oauth2_provider.generators import generate_client_secret
from oauth2_provider.models import AccessToken, Application, RefreshToken

from fleet.inventory.models import Satellite, SatelliteCredential


@dataclass(frozen=True)
class IssuedCredential:
    client_id: str
    client_secret: str
    rotated: bool


@transaction.atomic
def satellite_credentials_issue(*, satellite: Satellite) -> IssuedCredential:
    """Create the satellite's OAuth2 client, or rotate its secret (revoking issued tokens).
    The secret is stored hashed: this is the only time it is visible."""
    secret = generate_client_secret()
    credential = SatelliteCredential.objects.select_related("application").filter(satellite=satellite).first()
    if credential is None:
        application = Application.objects.create(
            name=f"satellite {satellite.site.slug}/{satellite.name}",
            client_type=Application.CLIENT_CONFIDENTIAL,
            authorization_grant_type=Application.GRANT_CLIENT_CREDENTIALS,
            client_secret=secret,
            hash_client_secret=True,
        )
        SatelliteCredential.objects.create(satellite=satellite, application=application)
        return IssuedCredential(application.client_id, secret, rotated=False)
    application = credential.application
    application.client_secret = secret
    application.save()
    RefreshToken.objects.filter(application=application).delete()
    AccessToken.objects.filter(application=application).delete()
    return IssuedCredential(application.client_id, secret, rotated=True)


@transaction.atomic
def operator_credentials_issue(*, name: str, owner) -> IssuedCredential:
    """Create or rotate an automation client owned by a person; it may hold every scope and acts
    while its owner is active."""
    secret = generate_client_secret()
    application = Application.objects.filter(name=name, user=owner).exclude(satellite_credential__isnull=False).first()
    if application is None:
        application = Application.objects.create(
            name=name,
            user=owner,
            client_type=Application.CLIENT_CONFIDENTIAL,
            authorization_grant_type=Application.GRANT_CLIENT_CREDENTIALS,
            client_secret=secret,
            hash_client_secret=True,
        )
        return IssuedCredential(application.client_id, secret, rotated=False)
    application.client_secret = secret
    application.save()
    RefreshToken.objects.filter(application=application).delete()
    AccessToken.objects.filter(application=application).delete()
    return IssuedCredential(application.client_id, secret, rotated=True)


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
