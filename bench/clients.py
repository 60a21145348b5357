"""An HTTP client holding a real OAuth2 token, so HTTP figures include authentication, scope
checks, throttling and (de)serialisation as an agent's requests pay them."""

from __future__ import annotations

import base64
import json
from typing import Any

from django.test import Client
from oauth2_provider.models import Application

from fleet.inventory.models import Satellite, SatelliteCredential

SECRET = "bench-client-secret-not-for-production"


class AgentClient:
    """The satellite's agent: a satellite-bound client-credentials token, JSON bodies."""

    def __init__(self, satellite: Satellite, scopes: list[str]) -> None:
        application = Application.objects.create(
            name=f"bench-agent-{satellite.name}",
            client_type=Application.CLIENT_CONFIDENTIAL,
            authorization_grant_type=Application.GRANT_CLIENT_CREDENTIALS,
            client_secret=SECRET,
        )
        SatelliteCredential.objects.create(satellite=satellite, application=application)
        self.client = Client()
        basic = base64.b64encode(f"{application.client_id}:{SECRET}".encode()).decode()
        response = self.client.post(
            "/o/token/",
            {"grant_type": "client_credentials", "scope": " ".join(scopes)},
            HTTP_AUTHORIZATION=f"Basic {basic}",
        )
        if response.status_code != 200:
            raise RuntimeError(f"token endpoint answered {response.status_code}: {response.content!r}")
        self.authorization = f"Bearer {response.json()['access_token']}"

    def post_json(self, path: str, body: str) -> dict[str, Any]:
        """POST an already-encoded JSON body (encoding is the agent's cost, not the server's)."""
        response = self.client.post(path, body, content_type="application/json", HTTP_AUTHORIZATION=self.authorization)
        if response.status_code != 200:
            raise RuntimeError(f"POST {path} answered {response.status_code}: {response.content[:500]!r}")
        return response.json()


def encode(body: Any) -> str:
    return json.dumps(body, separators=(",", ":"))
