"""Ed25519 keys and signatures with no Django in reach: what an offline verifier
(`fleet evidence-pack verify --keys`, `fleet certificate verify --keys`) needs, importable before (and
without) the service's settings, so that verifying reads its inputs and nothing else."""

from __future__ import annotations

import base64
import binascii
import hashlib
import os
from pathlib import Path

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

ALGORITHM = "Ed25519"


def key_id(public_raw: bytes) -> str:
    return hashlib.sha256(public_raw).hexdigest()[:32]


def public_raw(key: Ed25519PrivateKey) -> bytes:
    return key.public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)


def signature_valid(public_key: bytes, signature_b64: str, data: bytes) -> bool:
    try:
        signature = base64.b64decode(signature_b64, validate=True)
        Ed25519PublicKey.from_public_bytes(public_key).verify(signature, data)
    except (InvalidSignature, ValueError, binascii.Error):
        return False
    return True


def mint_key_file(path: Path) -> bool:
    """Write a new private key (PEM, PKCS#8) to `path`, created exclusively with owner-only
    permissions; False when a key is already there (it is never replaced)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    pem = Ed25519PrivateKey.generate().private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return False
    with os.fdopen(fd, "wb") as handle:
        handle.write(pem)
    return True


def read_private_key(path: Path) -> Ed25519PrivateKey:
    """The private key at `path` (OSError when absent or unreadable, ValueError when not Ed25519)."""
    loaded = serialization.load_pem_private_key(path.read_bytes(), password=None)
    if not isinstance(loaded, Ed25519PrivateKey):
        raise ValueError(f"{path} is not an Ed25519 private key")
    return loaded
