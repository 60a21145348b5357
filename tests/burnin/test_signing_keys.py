"""Issue 42 (2, 3): the certificate signing key is the service's alone.

Its location is one setting resolved once to an absolute path (`FLEET_CERTIFICATE_KEY_FILE`, else
`certificate_key.pem` in `FLEET_DATA_DIR`, else in the checkout's `.fleet`, found from the settings
module, never from the current directory); a key is minted only by `fleet keys init` (and the demo),
never as a side effect of signing; it signs only once it is published (`fleet keys init` publishes
the key it mints, `fleet keys publish` one an operator put there). `fleet evidence-pack verify` is a
pure reader: with `--keys` it needs no database and writes nothing; without keys it says so in one
line.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import call_command

from fleet.burnin.certificates import signing
from fleet.burnin.certificates.signing import SigningKeyUnavailable, signing_key
from fleet.burnin.models import CertificateKey
from tests.helpers import REPO


def _clean_env(**extra: str) -> dict[str, str]:
    """This process's environment without anything that names a database, a key or a data folder."""
    env = {
        k: v for k, v in os.environ.items() if not k.startswith("FLEET_") and k not in ("DATABASE_URL", "SECRET_KEY")
    }
    return env | extra


def _fleet(*args: str, cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "fleet", *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=120
    )


def _files(*folders: Path) -> list[Path]:
    return sorted(p for folder in folders for p in folder.rglob("*"))


@pytest.mark.process
def test_the_key_location_does_not_depend_on_the_current_directory(tmp_path):
    probe = "import django; django.setup(); from django.conf import settings; print(settings.CERTIFICATE_KEY_FILE)"
    env = _clean_env(DJANGO_SETTINGS_MODULE="fleet.settings", SECRET_KEY="x" * 50)
    elsewhere = subprocess.run(
        [sys.executable, "-c", probe], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60
    )
    here = subprocess.run([sys.executable, "-c", probe], cwd=REPO, env=env, capture_output=True, text=True, timeout=60)

    assert elsewhere.returncode == 0, elsewhere.stderr
    path = Path(elsewhere.stdout.strip())
    assert path.is_absolute() and path == Path(here.stdout.strip())
    assert tmp_path not in path.parents, f"{path}: resolved from the current directory"
    assert _files(tmp_path) == [], "loading the settings wrote into the current directory"


def test_signing_never_mints_a_key(settings, tmp_path, db):
    settings.CERTIFICATE_KEY_FILE = str(tmp_path / "none.pem")

    with pytest.raises(SigningKeyUnavailable, match="fleet keys init"):
        signing_key()

    assert not (tmp_path / "none.pem").exists()


def test_keys_init_mints_once_owner_only_and_publishes_and_a_key_signs_only_once_published(settings, tmp_path, db):
    path = tmp_path / "keys" / "certificate_key.pem"
    settings.CERTIFICATE_KEY_FILE = str(path)
    suite = set(CertificateKey.objects.values_list("key_id", flat=True))  # the suite's own key (conftest)
    out = StringIO()

    call_command("keys", "init", stdout=out)

    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    key = signing_key()
    assert set(CertificateKey.objects.values_list("key_id", flat=True)) - suite == {key.key_id}
    assert key.key_id in out.getvalue() and str(path) in out.getvalue()
    minted = path.read_bytes()
    call_command("keys", "init", stdout=StringIO())  # again: the same key, still one published
    assert path.read_bytes() == minted and CertificateKey.objects.count() == len(suite) + 1

    # A key an operator put in place (a rotation) signs once it is published, not before.
    other = tmp_path / "rotated.pem"
    signing.mint_key_file(other)
    settings.CERTIFICATE_KEY_FILE = str(other)
    with pytest.raises(SigningKeyUnavailable, match="fleet keys publish"):
        signing_key()
    call_command("keys", "publish", stdout=StringIO())
    assert signing_key().key_id in set(CertificateKey.objects.values_list("key_id", flat=True))
    assert CertificateKey.objects.count() == len(suite) + 2


@pytest.mark.process
def test_verify_with_keys_needs_no_database_and_writes_nothing(tmp_path):
    """A pack refused for its content still exercises the whole reader; run with no DATABASE_URL,
    no SECRET_KEY, an empty data folder and another current directory."""
    work, data = tmp_path / "work", tmp_path / "data"
    work.mkdir()
    data.mkdir()
    inputs = tmp_path / "inputs"
    inputs.mkdir()
    (inputs / "keys.json").write_text(json.dumps({"keys": []}))
    (inputs / "pack.zip").write_bytes(b"PK\x05\x06" + b"\0" * 18)  # an empty zip: nothing signed in it
    before = _files(inputs)

    done = _fleet(
        "evidence-pack",
        "verify",
        str(inputs / "pack.zip"),
        "--keys",
        str(inputs / "keys.json"),
        cwd=work,
        env=_clean_env(FLEET_DATA_DIR=str(data)),
    )

    assert done.returncode == 1, done.stderr
    assert "REFUSED: manifest.json is missing from the pack" in done.stdout, done.stdout + done.stderr
    assert done.stderr == ""
    assert _files(work, data) == [] and _files(inputs) == before, "the verifier wrote something"


@pytest.mark.process
def test_verify_without_keys_or_a_database_is_one_clear_line(tmp_path):
    work, data = tmp_path / "work", tmp_path / "data"
    work.mkdir()
    data.mkdir()
    (work / "pack.zip").write_bytes(b"PK\x05\x06" + b"\0" * 18)

    done = _fleet("evidence-pack", "verify", "pack.zip", cwd=work, env=_clean_env(FLEET_DATA_DIR=str(data)))

    assert done.returncode == 1
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "--keys" in lines[0] and "DATABASE_URL" in lines[0], done.stderr
    assert _files(data) == [] and _files(work) == [work / "pack.zip"]
