"""`fleet_rules.canonical.canonical_json`: the fast path writes exactly what RFC 8785 writes. No
database. (Moved from tests/rules/test_resolution.py with the function.)"""

from __future__ import annotations

import rfc8785
from hypothesis import given
from hypothesis import strategies as st

from fleet_rules.canonical import canonical_json

#: Keys from the places the orderings of Python (code point) and RFC 8785 (UTF-16 unit) part:
#: U+E000…U+FFFF sort after U+10000… in UTF-16.
keys = st.one_of(st.text(max_size=6), st.sampled_from(["", "a", "\ue000", "\uffff", "\U00010000", "\U0001f600"]))
#: Floats of every form: fractions below 1e-4 and above 2**53, integral ones, -0.0, NaN, infinities.
floats = st.one_of(
    st.floats(),
    st.sampled_from([0.0, -0.0, 1e-4, 9.9e-5, 1e-7, 1e16, 1e21, 1e22, 2.0**53, 2.0**53 + 2, 2.0**60, 431.0, -3.5]),
)
integers = st.one_of(st.integers(), st.sampled_from([2**53 - 1, 2**53, -(2**53) + 1, -(2**53)]))
scalars = st.one_of(st.none(), st.booleans(), integers, floats, st.text(max_size=8))
json_values = st.recursive(
    scalars,
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(keys, inner, max_size=4)),
    max_leaves=24,
)


def _outcome(write, value):
    """The bytes `write` gives, or the kind of refusal."""
    try:
        return write(value)
    except rfc8785.CanonicalizationError as exc:
        return type(exc)


def _rfc8785(value):
    return _outcome(rfc8785.dumps, value)


def _ours(value):
    return _outcome(canonical_json, value)


@given(json_values)
def test_canonical_json_is_rfc8785_byte_for_byte(value):
    assert _ours(value) == _rfc8785(value)


def test_canonical_json_at_the_edges_of_its_fast_path():
    """Each value below is written differently by json.dumps and by RFC 8785 (or refused by one
    only): the fast path must hand it over, not write json.dumps's form."""
    for value in (
        {"t": 1e-5},  # json 1e-05, JCS 0.00001
        {"t": 1e-7},  # json 1e-07, JCS 1e-7
        {"t": 2.0**60},  # json 1.152921504606847e+18, JCS 1152921504606847000
        {"t": 431.0, "u": -0.0},  # json 431.0 / -0.0, JCS 431 / 0
        {"\ue000": 1, "\U0001f600": 2},  # code-point order puts U+E000 first, UTF-16 order last
        {"n": 2**53},  # JCS refuses it
        {"n": float("nan")},
        {1: "int key"},  # json writes "1", JCS refuses
        ["\ud800"],  # a lone surrogate: JCS refuses it
    ):
        assert _ours(value) == _rfc8785(value), value
    assert _ours({"b": 431.0, "a": [1e-4, 0.5, True, None]}) == b'{"a":[0.0001,0.5,true,null],"b":431}'
