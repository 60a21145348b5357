"""The certificate endpoints and `fleet certificate verify|export`: a certified device's
certificate verifies with the command and with an independent verifier; one byte edited, both
refuse."""

from __future__ import annotations

import base64
import json
from io import StringIO

import pytest
import rfc8785
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
from django.contrib.auth.models import Group
from django.core.management import CommandError, call_command
from rest_framework.test import APIClient

from fleet.access.roles import VIEWER, roles_sync
from fleet.burnin.certificates.reads import envelope
from tests.burnin.certs import current, evaluate_now, sweep
from tests.conftest import fetch_token
from tests.schema_validation import ValidatingAPIClient

RC = "gpu.h200.8x"
GOOD = {"diag_failed_tests": {"value": 0}}
BAD = {"diag_failed_tests": {"value": 3}}


def independent_verify(file_bytes: bytes, keys: dict) -> bool:
    """Shares no code with the service: json, rfc8785 and cryptography only."""
    try:
        envelope = json.loads(file_bytes)
        key = next(k for k in keys["keys"] if k["key_id"] == envelope["key_id"])
        Ed25519PublicKey.from_public_bytes(base64.b64decode(key["public_key"])).verify(
            base64.b64decode(envelope["signature"]), rfc8785.dumps(envelope["certificate"])
        )
    except (InvalidSignature, ValueError, KeyError, StopIteration):
        return False
    return True


def verify_command(*args: str) -> tuple[int, str]:
    out = StringIO()
    try:
        call_command("certificate", "verify", *args, stdout=out)
    except SystemExit as exc:
        return int(exc.code or 0), out.getvalue()
    return 0, out.getvalue()


@pytest.fixture
def certified(fleet):
    site = fleet.site("lon-1")
    satellite = fleet.satellite(site, "sat-a")
    policy = fleet.policy(RC)
    diag = fleet.requirement(policy, "gpu-diag")
    devices = [fleet.device(satellite, RC, hostname=f"n{i}") for i in range(3)]
    evaluate_now(*(fleet.execution(diag, device=d, metrics=GOOD) for d in devices[:2]))
    sweep(satellite)
    return site, satellite, diag, devices


@pytest.fixture
def viewer(user_factory):
    roles_sync()
    user = user_factory("viewer")
    user.groups.add(Group.objects.get(name=VIEWER))
    client = ValidatingAPIClient(enforce_csrf_checks=True)
    client.force_login(user)
    return client


def test_a_certified_device_verifies_with_the_command_and_independently_and_one_byte_breaks_both(
    certified, viewer, tmp_path
):
    site, satellite, diag, devices = certified
    response = viewer.get(f"/api/v1/devices/{devices[0].id}/certificate/")
    assert response.status_code == 200, response.content
    keys = viewer.get("/api/v1/certificates/keys/").json()
    assert [k["algorithm"] for k in keys["keys"]] == ["Ed25519"]
    assert len(base64.b64decode(keys["keys"][0]["public_key"])) == 32
    body = response.content
    assert json.loads(body)["certificate"]["device"]["hostname"] == "n0"
    keys_file = tmp_path / "keys.json"
    keys_file.write_text(json.dumps(keys))
    good = tmp_path / "n0.json"
    good.write_bytes(body)

    assert independent_verify(body, keys)
    status, out = verify_command(str(good), "--keys", str(keys_file))
    assert status == 0, out
    assert "OK" in out

    # One byte of the content edited: the device's hostname n0 → n1.
    edited = body.replace(b'"hostname":"n0"', b'"hostname":"n1"')
    assert edited != body and len(edited) == len(body)
    bad = tmp_path / "edited.json"
    bad.write_bytes(edited)
    assert not independent_verify(edited, keys)
    status, out = verify_command(str(bad), "--keys", str(keys_file))
    assert status == 1
    assert "REFUSED: signature does not match" in out

    # Without --keys the command reads the service's published keys.
    assert verify_command(str(good))[0] == 0


def test_a_device_without_a_certificate_is_a_404_error_response(certified, viewer):
    _, _, _, devices = certified
    response = viewer.get(f"/api/v1/devices/{devices[2].id}/certificate/")
    assert response.status_code == 404
    assert response.json()["code"] == "not_found"
    assert "no valid acceptance certificate" in response.json()["detail"]


def test_the_history_keeps_superseded_certificates_with_their_reason_and_the_chain_verifies(
    fleet, certified, viewer, tmp_path
):
    site, satellite, diag, devices = certified
    first = current(devices[0])
    evaluate_now(fleet.execution(diag, device=devices[0], metrics=BAD))
    sweep(satellite)
    assert viewer.get(f"/api/v1/devices/{devices[0].id}/certificate/").status_code == 404
    evaluate_now(fleet.execution(diag, device=devices[0], metrics=GOOD))
    sweep(satellite)

    history = viewer.get(f"/api/v1/devices/{devices[0].id}/certificates/").json()["certificates"]
    assert [(h["valid"], h["supersede_reason"]) for h in history] == [(True, None), (False, "failed")]
    assert history[1]["sha256"] == first.sha256
    assert history[0]["certificate"]["previous_certificate_sha256"] == first.sha256

    files = []
    for i, entry in enumerate(history):
        path = tmp_path / f"{i}.json"
        path.write_text(json.dumps({k: entry[k] for k in ("certificate", "signature", "key_id")}))
        files.append(str(path))
    status, out = verify_command(*files)
    assert status == 0, out
    assert "chain intact" in out

    # Alone, the newer one still verifies; its link cannot be checked without the older one.
    status, out = verify_command(files[0])
    assert status == 0 and "chain not checked" in out


def test_reading_needs_the_view_permission(certified, session_client, bearer):
    _, _, _, devices = certified
    nobody = session_client(perms=[], username="nobody")
    assert nobody.get(f"/api/v1/devices/{devices[0].id}/certificate/").status_code == 403
    assert nobody.get("/api/v1/certificates/keys/").status_code == 403
    machine = bearer(["fleet:read"])
    assert machine.get(f"/api/v1/devices/{devices[0].id}/certificate/").status_code == 200


def test_export_writes_every_valid_certificate_of_a_site_as_a_verifiable_file(certified, tmp_path):
    out = StringIO()
    call_command("certificate", "export", "--site", "lon-1", "--dir", str(tmp_path / "out"), stdout=out)
    files = sorted((tmp_path / "out").iterdir())
    assert [f.name.split(".")[0] for f in files] == ["n0", "n1"]
    assert all(f.read_bytes() == rfc8785.dumps(json.loads(f.read_bytes())) for f in files)
    assert verify_command(*map(str, files))[0] == 0


def test_a_rotated_key_keeps_the_old_certificates_verifiable(fleet, settings, tmp_path, viewer):
    from fleet.burnin.certificates import signing
    from fleet.burnin.certificates.ed25519 import read_private_key

    site = fleet.site("rot-1")
    satellite = fleet.satellite(site, "sat-a")
    diag = fleet.requirement(fleet.policy(RC), "gpu-diag")
    devices = [fleet.device(satellite, RC, hostname=f"r{i}") for i in range(2)]
    settings.CERTIFICATE_KEY_FILE = str(tmp_path / "old.pem")
    signing.signing_key_init()
    evaluate_now(fleet.execution(diag, device=devices[0], metrics=GOOD))
    sweep(satellite)
    settings.CERTIFICATE_KEY_FILE = str(tmp_path / "new.pem")  # a rotation: `fleet keys init` again
    signing.signing_key_init()
    evaluate_now(fleet.execution(diag, device=devices[1], metrics=GOOD))
    sweep(satellite)
    assert (tmp_path / "old.pem").stat().st_mode & 0o777 == 0o600
    old, new = current(devices[0]), current(devices[1])
    assert old.key_id != new.key_id
    assert old.key_id == signing.key_id(signing.public_raw(read_private_key(tmp_path / "old.pem")))

    keys = viewer.get("/api/v1/certificates/keys/").json()
    assert {old.key_id, new.key_id} <= {k["key_id"] for k in keys["keys"]}
    for device in devices:
        body = viewer.get(f"/api/v1/devices/{device.id}/certificate/").content
        assert independent_verify(body, keys)


def test_verify_reads_the_published_keys_from_a_url_with_a_token(certified, live_server, oauth_client, tmp_path):
    _, _, _, devices = certified
    path = tmp_path / "n0.json"
    path.write_text(json.dumps(envelope(current(devices[0]))))
    token = fetch_token(APIClient(), oauth_client(), ["fleet:read"])
    url = f"{live_server.url}/api/v1/certificates/keys/"
    status, out = verify_command(str(path), "--keys", url, "--token", token)
    assert status == 0, out
    with pytest.raises(CommandError, match="cannot read keys"):
        verify_command(str(path), "--keys", url)  # no token: 401
