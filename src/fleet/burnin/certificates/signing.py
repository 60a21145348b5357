"""The Ed25519 key that signs certificates and evidence packs: where it is, how it comes to be,
and when it may sign.

* **Where**: `settings.CERTIFICATE_KEY_FILE` — `FLEET_CERTIFICATE_KEY_FILE`, else
  `certificate_key.pem` in the data folder — resolved once, absolute, when the settings load (never
  from the current directory; docs/security.md).
* **Minted** only by `fleet keys init` (`signing_key_init`; the demo calls it): signing never creates
  a key, so a command run from another directory cannot sign with a key nobody configured.
* **Published** explicitly: `fleet keys init` publishes the key it mints, `fleet keys publish` one an
  operator put in place (a rotation). A key signs only once published (`CertificateKey`), so every
  signature the service makes verifies against `GET /api/v1/certificates/keys/`; rotating keeps
  every old public key published and every old certificate verifiable.

The pure crypto is `ed25519` (importable without Django, for offline verifiers).
"""

from __future__ import annotations

import base64
from dataclasses import dataclass
from pathlib import Path

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from django.conf import settings
from django.utils import timezone
from rest_framework import status

from fleet.burnin.certificates.ed25519 import (
    ALGORITHM,
    key_id,
    mint_key_file,
    public_raw,
    read_private_key,
    signature_valid,
)
from fleet.burnin.models import CertificateKey
from fleet.core.error_schema import ErrorCode
from fleet.core.exceptions import FleetError

__all__ = [
    "ALGORITHM",
    "SigningKey",
    "SigningKeyUnavailable",
    "key_id",
    "mint_key_file",
    "public_raw",
    "published_keys",
    "signature_valid",
    "signing_key",
    "signing_key_init",
    "signing_key_publish",
]


class SigningKeyUnavailable(FleetError):
    """No key to sign with (none at the configured path, or not published): the service cannot
    sign until an operator runs `fleet keys init` / `fleet keys publish` (503, never a 500)."""

    status_code = status.HTTP_503_SERVICE_UNAVAILABLE
    code = ErrorCode.SERVICE_UNAVAILABLE


@dataclass(frozen=True)
class SigningKey:
    key_id: str
    private: Ed25519PrivateKey
    public_raw: bytes

    def sign(self, data: bytes) -> str:
        return base64.b64encode(self.private.sign(data)).decode()


def key_path() -> Path:
    return Path(settings.CERTIFICATE_KEY_FILE)


def _load(path: Path) -> SigningKey:
    if not path.exists():
        raise SigningKeyUnavailable(
            f"No certificate signing key at {path}: run `fleet keys init` to mint and publish one "
            "(or set FLEET_CERTIFICATE_KEY_FILE to the key's file)."
        )
    try:
        private = read_private_key(path)
    except (OSError, ValueError) as exc:
        raise SigningKeyUnavailable(f"The certificate signing key at {path} cannot be read: {exc}") from exc
    raw = public_raw(private)
    return SigningKey(key_id(raw), private, raw)


#: Keys loaded and found published, by path (a published key stays published: rows are never deleted).
_loaded: dict[str, SigningKey] = {}


def signing_key() -> SigningKey:
    """The configured key, once it exists and is published (`SigningKeyUnavailable` otherwise);
    loaded and checked once per process and path. Never creates a key."""
    path = key_path()
    key = _loaded.get(str(path))
    if key is None:
        key = _load(path)
        if not CertificateKey.objects.filter(key_id=key.key_id).exists():
            raise SigningKeyUnavailable(
                f"The certificate signing key at {path} (id {key.key_id}) is not published: run "
                "`fleet keys publish` to publish it before it signs."
            )
        _loaded[str(path)] = key
    return key


def signing_key_publish() -> SigningKey:
    """Publish the configured key (idempotent): from now on it signs, and verifiers find it."""
    key = _load(key_path())
    CertificateKey.objects.get_or_create(
        key_id=key.key_id, defaults={"public_key": key.public_raw, "created_at": timezone.now()}
    )
    return key


def signing_key_init() -> tuple[SigningKey, bool]:
    """Mint a key at the configured path when there is none (never replacing one), and publish it;
    (the key, whether it was minted now)."""
    minted = mint_key_file(key_path())
    return signing_key_publish(), minted


def published_keys() -> dict[str, bytes]:
    """Every key that ever signed: key id → 32 raw bytes."""
    return {k.key_id: bytes(k.public_key) for k in CertificateKey.objects.all()}
