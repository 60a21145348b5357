"""The Ed25519 key that signs certificates, and verification against published keys.

The private key is a PEM file (`CERTIFICATE_KEY_FILE`, env `FLEET_CERTIFICATE_KEY_FILE`, by default in the data folder,
generated on first use like the secret key). Its public key is recorded in `CertificateKey` the
first time it signs, so rotating the key (pointing the setting at a new file) keeps every old
public key published and every old certificate verifiable.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import os
from dataclasses import dataclass
from pathlib import Path

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from django.conf import settings

from fleet.burnin.models import CertificateKey

ALGORITHM = "Ed25519"


@dataclass(frozen=True)
class SigningKey:
    key_id: str
    private: Ed25519PrivateKey
    public_raw: bytes

    def sign(self, data: bytes) -> str:
        return base64.b64encode(self.private.sign(data)).decode()


def key_id(public_raw: bytes) -> str:
    return hashlib.sha256(public_raw).hexdigest()[:32]


def public_raw(key: Ed25519PrivateKey) -> bytes:
    return key.public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)


_loaded: dict[str, SigningKey] = {}


def _read_or_create(path: Path) -> Ed25519PrivateKey:
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        pem = Ed25519PrivateKey.generate().private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
        # Created exclusively with owner-only permissions; a concurrent first start that lost
        # the race reads the winner's key below.
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:
            pass
        else:
            with os.fdopen(fd, "wb") as handle:
                handle.write(pem)
    loaded = serialization.load_pem_private_key(path.read_bytes(), password=None)
    if not isinstance(loaded, Ed25519PrivateKey):
        raise ValueError(f"{path} is not an Ed25519 private key")
    return loaded


def signing_key() -> SigningKey:
    """The current signing key (loaded once per process and path). Issuance records its public
    key in the statement that first signs with it."""
    path = str(settings.CERTIFICATE_KEY_FILE)
    key = _loaded.get(path)
    if key is None:
        private = _read_or_create(Path(path))
        raw = public_raw(private)
        key = SigningKey(key_id(raw), private, raw)
        _loaded[path] = key
    return key


def published_keys() -> dict[str, bytes]:
    """Every key that ever signed: key id → 32 raw bytes."""
    return {k.key_id: bytes(k.public_key) for k in CertificateKey.objects.all()}


def signature_valid(public_key: bytes, signature_b64: str, data: bytes) -> bool:
    try:
        signature = base64.b64decode(signature_b64, validate=True)
        Ed25519PublicKey.from_public_bytes(public_key).verify(signature, data)
    except (InvalidSignature, ValueError, binascii.Error):
        return False
    return True
