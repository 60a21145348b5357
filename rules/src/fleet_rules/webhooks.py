"""Webhooks' decisions, without a database: how a delivery is signed (the Standard Webhooks
scheme), when a failed delivery is tried again (exponential backoff with jitter, for a bounded
window), and which addresses a delivery may not reach (SSRF: loopback, link-local, private).

The signature: `webhook-signature: v1,<base64 HMAC-SHA256 over "<webhook-id>.<webhook-timestamp>.<body>">`,
keyed by the secret's bytes (`whsec_<base64>`), as https://www.standardwebhooks.com/ specifies, so a
receiver checks it with any Standard Webhooks library or five lines of `hmac`.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import ipaddress
import random
import secrets
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta

SECRET_PREFIX = "whsec_"
SIGNATURE_VERSION = "v1"
#: A secret's key length in bytes (Standard Webhooks: between 24 and 64).
SECRET_BYTES = 32
#: A receiver refuses a timestamp further than this from its clock (replays).
TIMESTAMP_TOLERANCE = timedelta(minutes=5)

#: The first retry's delay; each next one doubles, up to `MAX_BACKOFF`, with jitter.
FIRST_BACKOFF = timedelta(seconds=5)
MAX_BACKOFF = timedelta(hours=1)
#: How long a delivery is retried before the subscription is marked failing (per subscription).
RETRY_WINDOW = timedelta(hours=24)


def secret_new() -> str:
    """A new signing secret, `whsec_` and the base64 of 32 random bytes."""
    return SECRET_PREFIX + base64.b64encode(secrets.token_bytes(SECRET_BYTES)).decode()


def secret_key(secret: str) -> bytes:
    """The HMAC key a `whsec_…` secret stands for (ValueError when it is not one)."""
    if not secret.startswith(SECRET_PREFIX):
        raise ValueError(f"a signing secret starts with {SECRET_PREFIX}")
    key = base64.b64decode(secret[len(SECRET_PREFIX) :], validate=True)
    if not 24 <= len(key) <= 64:
        raise ValueError("a signing secret's key is 24 to 64 bytes")
    return key


def signature(secret: str, message_id: str, timestamp: int, body: bytes) -> str:
    """The `webhook-signature` header's value for this message."""
    signed = f"{message_id}.{timestamp}.".encode() + body
    digest = hmac.new(secret_key(secret), signed, hashlib.sha256).digest()
    return f"{SIGNATURE_VERSION},{base64.b64encode(digest).decode()}"


def headers(secret: str, message_id: str, timestamp: int, body: bytes) -> dict[str, str]:
    """The three Standard Webhooks headers (and the content type) of one delivery."""
    return {
        "content-type": "application/cloudevents+json",
        "webhook-id": message_id,
        "webhook-timestamp": str(timestamp),
        "webhook-signature": signature(secret, message_id, timestamp, body),
    }


def verified(secret: str, message_id: str, timestamp: int, body: bytes, header: str, *, now: int) -> bool:
    """A receiver's check: one of the header's space-separated signatures is ours, in time."""
    if abs(now - timestamp) > TIMESTAMP_TOLERANCE.total_seconds():
        return False
    expected = signature(secret, message_id, timestamp, body)
    return any(hmac.compare_digest(expected, candidate) for candidate in header.split(" "))


# --- retries ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Retry:
    """After a failed try: when to try again, or `None` (give up: the window has passed)."""

    at: datetime | None


def next_try(
    *,
    attempts: int,
    first_tried: datetime,
    now: datetime,
    window: timedelta = RETRY_WINDOW,
    first_backoff: timedelta = FIRST_BACKOFF,
    rng: random.Random | None = None,
) -> Retry:
    """Exponential backoff with jitter (a delay drawn in [base/2, base], base doubling from
    `first_backoff`, capped at `MAX_BACKOFF`): receivers coming back are not hit by every sender at
    once. Given up once the next try would fall after `first_tried + window`."""
    base = min(first_backoff * (2 ** min(max(attempts - 1, 0), 30)), MAX_BACKOFF)
    draw = (rng or random).uniform(0.5, 1.0)
    at = now + base * draw
    return Retry(None if at > first_tried + window else at)


# --- where a delivery may go ------------------------------------------------------------------------


def refused_address(address: str) -> str | None:
    """Why a delivery may not connect to this IP address (None: it may). Loopback, link-local
    (cloud metadata lives there), private, shared, reserved, multicast and unspecified addresses are
    inside the house: a subscription reaches them only where an admin allowed it."""
    ip = ipaddress.ip_address(address)
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    for kind, test in (
        ("loopback", ip.is_loopback),
        ("link-local", ip.is_link_local),
        ("private", ip.is_private),
        ("multicast", ip.is_multicast),
        ("reserved", ip.is_reserved),
        ("unspecified", ip.is_unspecified),
    ):
        if test:
            return f"{address} is a {kind} address"
    if isinstance(ip, ipaddress.IPv4Address) and ip in ipaddress.ip_network("100.64.0.0/10"):
        return f"{address} is a shared (carrier-grade NAT) address"
    return None


def first_refusal(addresses: Iterable[str]) -> str | None:
    """Why any of a host's addresses is refused (a name resolving to one inside address is refused
    whole: the connection could go to either)."""
    for address in addresses:
        why = refused_address(address)
        if why is not None:
            return why
    return None
