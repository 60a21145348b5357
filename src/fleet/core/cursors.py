"""Opaque, signed cursors: a client can hand them back but cannot forge or edit them."""

from __future__ import annotations

from typing import Any

from django.core import signing
from django.core.exceptions import ValidationError


def cursor_encode(payload: dict[str, Any], *, purpose: str) -> str:
    return signing.dumps(payload, salt=f"fleet.cursor.{purpose}", compress=True)


def cursor_decode(token: str, *, purpose: str, field: str = "cursor", restart_hint: str = "") -> dict[str, Any]:
    """The cursor's payload, or a 400 on `field` when it was not issued by us for `purpose`."""
    try:
        payload = signing.loads(token, salt=f"fleet.cursor.{purpose}")
    except signing.BadSignature as exc:
        message = "The cursor is not valid (tampered with, truncated or issued for something else)."
        raise ValidationError({field: [f"{message} {restart_hint}".strip()]}) from exc
    if not isinstance(payload, dict):
        raise ValidationError({field: ["The cursor is not valid."]})
    return payload
