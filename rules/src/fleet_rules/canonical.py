"""RFC 8785 (JSON Canonicalization Scheme) bytes: what a threshold resolution's key hashes and what
an acceptance certificate signs. Both rest on the same bytes for the same value, so it is written
once, here."""

from __future__ import annotations

import json
from typing import Any

import rfc8785

#: Integers JSON numbers (IEEE doubles) hold exactly; RFC 8785 refuses the others.
_SAFE_INTEGER = 2**53 - 1
#: Below this magnitude Python writes a fraction with an exponent (1e-05), ECMAScript without.
_FIXED_FROM = 1e-4


class _NotPlain(Exception):
    """The value holds something json.dumps would write differently from RFC 8785."""


def _plain(value: Any) -> Any:
    """`value` as json.dumps writes it byte for byte as RFC 8785 does: a float with an integral
    value below 2**53 becomes that int (JCS writes 431.0 as 431); anything whose form could differ
    (a fraction below 1e-4, a float beyond 2**53, NaN, an unsafe integer, a key that is not a
    string or orders differently in UTF-16, a type JCS does not know) raises `_NotPlain`."""
    kind = type(value)
    if kind is str or value is None or kind is bool:
        return value
    if kind is int:
        if -_SAFE_INTEGER <= value <= _SAFE_INTEGER:
            return value
        raise _NotPlain
    if kind is float:
        if value.is_integer() and -_SAFE_INTEGER <= value <= _SAFE_INTEGER:
            return int(value)
        if _FIXED_FROM <= abs(value) < _SAFE_INTEGER:  # not integral, so NaN and infinities fail
            return value
        raise _NotPlain
    if kind is dict:
        plain = {}
        for key, item in value.items():
            # Python sorts keys by code point, RFC 8785 by UTF-16 unit: they differ past U+FFFF.
            if type(key) is not str or not (key.isascii() or max(key) <= "\uffff"):
                raise _NotPlain
            plain[key] = _plain(item)
        return plain
    if kind is list or kind is tuple:
        return [_plain(item) for item in value]
    raise _NotPlain  # enums and other subclasses: RFC 8785 decides


def canonical_json(value: Any) -> bytes:
    """RFC 8785 bytes of `value`. The C encoder writes them when `_plain` finds nothing it would
    write differently (4× faster on a certificate's document, profiled: certificates are
    canonicalised on every reconcile page that issues them); otherwise `rfc8785` does, as it
    also does for what it refuses. tests/rules/test_resolution.py holds the two equal."""
    try:
        plain = _plain(value)
        return json.dumps(plain, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode()
    except (_NotPlain, UnicodeEncodeError):
        return rfc8785.dumps(value)
