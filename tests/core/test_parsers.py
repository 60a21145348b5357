"""The parser's text checks in C (split, translate, substring search) read what their regular
expressions (the definitions) read."""

from __future__ import annotations

import json

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from fleet.core.parsers import (
    _NOT_BRACKETS,
    _STRING,
    _UNSTORABLE_NUMBER,
    _brackets,
    _unstorable_number,
    outside_strings,
)
from tests.support.hypothesis_profiles import examples

# Strings full of what the checks look for: quotes, backslashes, brackets, digits, exponents.
tricky = st.text(st.sampled_from(list('"\\[]{}0123456789eE+-.,: NaInfity') + ["é", "\u2028", "\x00"]), max_size=12)
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | tricky,
    lambda children: st.lists(children, max_size=4) | st.dictionaries(tricky, children, max_size=3),
    max_leaves=12,
)


@pytest.mark.slow
@settings(max_examples=examples(500), deadline=None)
@given(json_values, st.booleans())
@example(['a\\"b', "c"], True)
@example({"k\\": ['"']}, False)
def test_outside_strings_of_json_text_is_the_expressions(value, ascii_only):
    text = json.dumps(value, ensure_ascii=ascii_only)
    assert outside_strings(text) == _STRING.sub("", text)


@settings(max_examples=examples(500), deadline=None)
@given(tricky)
def test_brackets_are_the_expressions(text):
    assert _brackets(text) == _NOT_BRACKETS.sub("", text)


@settings(max_examples=examples(800), deadline=None)
@given(
    st.text(st.sampled_from(list("0123456789eE+-.,[]{} NaInfity")), max_size=40)
    | st.integers(295, 305).map("7".__mul__)
)
@example("1e999")
@example("2E-308")
@example("[1e+12]")
@example("NaN")
def test_unstorable_number_shapes_are_the_expressions(outside):
    assert _unstorable_number(outside) == (_UNSTORABLE_NUMBER.search(outside) is not None)
