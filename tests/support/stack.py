"""The whole system for end-to-end tests: the example fleet in the test database, a real `fleet serve`,
and real `fleet-agent` processes talking to it over HTTP (used by tests/e2e and tests/slurm)."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from django.conf import global_settings
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from oauth2_provider.models import Application

from fleet.access.roles import OPERATOR, roles_sync
from fleet.fleetfile.apply import fleet_apply
from fleet.fleetfile.document import parse_text
from fleet.inventory.models import Device, Satellite
from fleet.inventory.services import satellite_credentials_issue
from tests.helpers import REPO, fleet_env, start_server, stop

EXAMPLE = REPO / "examples" / "fleet.yaml"


@dataclass
class Stack:
    base: str
    server: subprocess.Popen
    satellite: Satellite
    client_id: str
    client_secret: str
    operator: httpx.Client
    state_dir: Path

    def agent_env(self, **extra: str) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("FLEET_AGENT_")}
        env.update(
            {
                "FLEET_AGENT_API": self.base,
                "FLEET_AGENT_SITE": "lon-1",
                "FLEET_AGENT_SATELLITE": self.satellite.name,
                "FLEET_AGENT_CLIENT_ID": self.client_id,
                "FLEET_AGENT_CLIENT_SECRET": self.client_secret,
                "FLEET_AGENT_STATE_DIR": str(self.state_dir),
                "FLEET_AGENT_TIME_SCALE": "0",
                "FLEET_AGENT_SLOW_SHARE": "0",
                "FLEET_AGENT_LOG_FORMAT": "json",
            }
        )
        env.update(extra)
        return env

    def agent(self, *args: str, timeout: float = 180, **extra: str) -> subprocess.CompletedProcess:
        result = subprocess.run(
            [sys.executable, "-m", "fleet_agent", *args],
            env=self.agent_env(**extra),
            capture_output=True,
            text=True,
            timeout=timeout,
            cwd=REPO,
        )
        assert result.returncode == 0, result.stderr[-4000:]
        return result

    def spawn_agent(self, *args: str, **extra: str) -> subprocess.Popen:
        return subprocess.Popen(
            [sys.executable, "-m", "fleet_agent", *args],
            env=self.agent_env(**extra),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=REPO,
        )

    def dispatch(self, device_ids, mode: str = "non_passing") -> dict:
        site = self.satellite.site_id
        response = self.operator.post(
            f"/api/v1/burn-in/sites/{site}/rerun-plans/dispatch/",
            json={"device_ids": [str(d) for d in device_ids], "mode": mode},
        )
        assert response.status_code == 200, response.text
        return response.json()


@contextlib.contextmanager
def running_stack(
    settings, tmp_path: Path, *, lease_seconds: int = 4, fleet_text: str | None = None
) -> Iterator[Stack]:
    """The example fleet (or `fleet_text`) applied, a `fleet serve` with `lease_seconds` job
    leases, and an operator client."""
    # Secrets must be hashed the way the server process checks them.
    settings.PASSWORD_HASHERS = global_settings.PASSWORD_HASHERS
    fleet_apply(document=parse_text(fleet_text if fleet_text is not None else EXAMPLE.read_text()))
    satellite = Satellite.objects.select_related("site").get(name="sat-a")
    issued = satellite_credentials_issue(satellite=satellite)
    operator_secret = "operator-secret-for-e2e"
    owner = get_user_model().objects.create_user("ops-lead")
    # An operator client acts with at most its owner's permissions: the owner is an operator.
    roles_sync()
    owner.groups.add(Group.objects.get(name=OPERATOR))
    operator = Application.objects.create(
        name="operator",
        user=owner,
        client_type=Application.CLIENT_CONFIDENTIAL,
        authorization_grant_type=Application.GRANT_CLIENT_CREDENTIALS,
        client_secret=operator_secret,
    )
    server, base = start_server(fleet_env(FLEET_JOB_LEASE_SECONDS=str(lease_seconds)), workers=2)
    http = None
    try:
        issued_token = httpx.post(
            f"{base}/o/token/",
            data={"grant_type": "client_credentials", "scope": "job:create fleet:read"},
            auth=(operator.client_id, operator_secret),
        )
        assert issued_token.status_code == 200, issued_token.text
        token = issued_token.json()["access_token"]
        http = httpx.Client(base_url=base, headers={"Authorization": f"Bearer {token}"}, timeout=60)
        yield Stack(base, server, satellite, issued.client_id, issued.client_secret, http, tmp_path / "agent")
    finally:
        if http is not None:
            http.close()
        output = stop(server)  # also when the setup above failed: no server outlives its test
        assert "Traceback" not in output, output[-4000:]


@pytest.fixture
def stack(transactional_db, settings, tmp_path):
    with running_stack(settings, tmp_path) as running:
        yield running


def sat_a_devices() -> list[Device]:
    return list(Device.objects.filter(satellite__name="sat-a", enrolled_at__isnull=False).order_by("hostname"))


def log_lines(result) -> list[dict]:
    return [json.loads(line) for line in result.stderr.splitlines() if line.startswith("{")]
