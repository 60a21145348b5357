"""Webhooks' pure decisions: the Standard Webhooks signature (checked by plain `hmac`), the retry
schedule, and the addresses a delivery may not reach."""

from __future__ import annotations

import base64
import hashlib
import hmac
import random
from datetime import UTC, datetime, timedelta

import pytest

from fleet_rules import webhooks

SECRET = "whsec_" + base64.b64encode(b"k" * 32).decode()


def test_the_signature_is_hmac_sha256_of_id_timestamp_and_body_as_the_spec_says():
    body = b'{"specversion":"1.0"}'
    expected = base64.b64encode(hmac.new(b"k" * 32, b"msg_1.1700000000." + body, hashlib.sha256).digest()).decode()
    assert webhooks.signature(SECRET, "msg_1", 1700000000, body) == f"v1,{expected}"
    headers = webhooks.headers(SECRET, "msg_1", 1700000000, body)
    assert headers["webhook-id"] == "msg_1" and headers["webhook-timestamp"] == "1700000000"


def test_a_tampered_body_a_wrong_secret_or_a_stale_timestamp_is_not_verified():
    body = b'{"a":1}'
    header = webhooks.signature(SECRET, "m", 1000, body)
    assert webhooks.verified(SECRET, "m", 1000, body, header, now=1001)
    assert not webhooks.verified(SECRET, "m", 1000, b'{"a":2}', header, now=1001)
    assert not webhooks.verified(webhooks.secret_new(), "m", 1000, body, header, now=1001)
    assert not webhooks.verified(SECRET, "m", 1000, body, header, now=1000 + 301)
    assert webhooks.verified(SECRET, "m", 1000, body, "v1,bogus " + header, now=1001)  # one of several


def test_a_secret_is_whsec_and_24_to_64_bytes():
    assert len(webhooks.secret_key(webhooks.secret_new())) == 32
    for bad in ("k" * 40, "whsec_" + base64.b64encode(b"short").decode(), "whsec_not base64!"):
        with pytest.raises(ValueError):
            webhooks.secret_key(bad)


def test_retries_back_off_exponentially_with_jitter_and_stop_after_the_window():
    start = datetime(2026, 1, 1, tzinfo=UTC)
    rng = random.Random(1)
    delays = []
    for attempts in range(1, 8):
        retry = webhooks.next_try(attempts=attempts, first_tried=start, now=start, rng=rng)
        assert retry.at is not None
        delays.append((retry.at - start).total_seconds())
    for attempts, delay in enumerate(delays, start=1):
        base = 5 * 2 ** (attempts - 1)
        assert base / 2 <= delay <= base
    capped = webhooks.next_try(attempts=40, first_tried=start, now=start, rng=rng)
    assert capped.at is not None and capped.at - start <= webhooks.MAX_BACKOFF
    late = start + webhooks.RETRY_WINDOW - timedelta(seconds=1)
    assert webhooks.next_try(attempts=30, first_tried=start, now=late, rng=rng).at is None


@pytest.mark.parametrize(
    "address",
    ["127.0.0.1", "::1", "10.1.2.3", "172.16.0.1", "192.168.1.1", "169.254.169.254", "fe80::1", "100.64.0.1",
     "0.0.0.0", "::ffff:127.0.0.1", "fd00::1", "224.0.0.1"],
)  # fmt: skip
def test_addresses_inside_the_house_are_refused(address):
    assert webhooks.refused_address(address) is not None


@pytest.mark.parametrize("address", ["93.184.216.34", "1.1.1.1", "2606:4700:4700::1111"])
def test_public_addresses_may_be_reached(address):
    assert webhooks.refused_address(address) is None
    assert webhooks.first_refusal([address, "10.0.0.1"]) is not None  # one inside address refuses the name
