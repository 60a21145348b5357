"""The upsert's hot-path validator answers exactly as the serializer does, or leaves the body to it.

`plainly_valid_results` skips DRF for plainly valid bodies; everything else must fall through to
`BurnInEvaluationResultsRequestSerializer`, which words the errors. These properties generate
bodies (valid, and broken in one or many places) and hold the two to the same answer.
"""

from __future__ import annotations

import copy
import json
import uuid
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from fleet.burnin.api.plain_results import plainly_valid_results
from fleet.burnin.api.serializers import BurnInEvaluationResultsRequestSerializer
from fleet.core.parsers import may_be_unstorable, storable_json_problem
from fleet_rules.vocabulary import Comparator
from tests.payloads import failing_payload, passing_payload
from tests.support.hypothesis_profiles import examples

LIMIT = 1000

junk = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=6),
    lambda children: st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=4), children, max_size=3),
    max_leaves=4,
)


def fields(draw: st.DrawFn, strategies: dict[str, st.SearchStrategy[Any]], optional: frozenset[str]) -> dict:
    return {
        name: draw(strategy) for name, strategy in strategies.items() if name not in optional or draw(st.booleans())
    }


offsets = st.sampled_from([UTC, timezone(timedelta(hours=2)), timezone(timedelta(hours=-7, minutes=-30))])
stamps = st.datetimes(min_value=datetime(1, 1, 2), max_value=datetime(9999, 12, 30), timezones=offsets).map(  # noqa: DTZ001 (bounds of naive draws, zoned by `timezones`)
    lambda d: d.isoformat()
) | st.sampled_from(["2026-12-01T10:00:00Z", "2026-12-01 10:00:00.123456+00:00", "2026-12-01T10:00+05:30"])
execution_ids = st.uuids().flatmap(
    lambda u: st.sampled_from([str(u), str(u).upper(), u.hex, f"{{{u}}}", f"urn:uuid:{u}"])
)
source_keys = st.text("0123456789abcdef", min_size=64, max_size=64)
plain_text = st.text(st.characters(blacklist_categories=["Cs"], blacklist_characters="\x00"), max_size=8)
texts = plain_text | st.sampled_from(["", "  ", " padded \n", "µs"])
thresholds = st.none() | st.integers(-(10**20), 10**20) | st.floats(allow_nan=False, allow_infinity=False) | plain_text
checks = st.fixed_dictionaries(
    {"passed": st.booleans(), "threshold": thresholds, "comparator": st.none() | st.sampled_from(Comparator.values)}
)


@st.composite
def metrics(draw: st.DrawFn) -> dict:
    return fields(
        draw,
        {
            "passed": st.booleans(),
            "value_evaluation": st.none() | checks,
            "statistic_evaluations": st.none() | st.dictionaries(texts, checks, max_size=2),
        },
        frozenset({"value_evaluation", "statistic_evaluations"}),
    )


@st.composite
def payloads(draw: st.DrawFn) -> dict:
    return fields(
        draw,
        {
            "passed": st.booleans(),
            "reason": st.none() | texts,
            "metric_evaluations": st.dictionaries(texts, metrics(), max_size=3),
        },
        frozenset({"reason", "metric_evaluations"}),
    )


items = st.fixed_dictionaries(
    {
        "execution_id": execution_ids,
        "evaluation_result": payloads(),
        "evaluation_source_key": source_keys,
        "expected_updated_at": stamps,
    }
)
#: Valid bodies in every spelling the serializer accepts (ids are distinct: uuid4 draws).
valid_bodies = st.lists(items, max_size=4).map(lambda results: {"results": results})

broken_values = junk | st.sampled_from(
    [
        "2026-12-01T10:00:00",  # naive
        "2026-12-01",
        "0001-01-01T00:00:00+01:00",  # overflows when moved to UTC
        "2026-13-01T00:00:00+00:00",
        "ab" * 31 + "AB",
        "ab" * 32 + "\n",
        " " + "ab" * 32,
        "GTE",
        "between",
        "nul\x00",
        "lone \ud800",
        " 6ba7b810-9dad-11d1-80b4-00c04fd430c8",
        10**400,
        float("nan"),
        float("inf"),
    ]
)


def _places(value: Any, path: tuple = ()) -> list[tuple]:
    """Every place in `value` a mutation can hit: each container, and each member in it."""
    places = [path]
    if isinstance(value, dict):
        for key, item in value.items():
            places += _places(item, (*path, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            places += _places(item, (*path, index))
    return places


@st.composite
def broken_bodies(draw: st.DrawFn) -> Any:
    """A valid body broken in one to three places: a member replaced, removed, or added, or a
    duplicate id (every way a client gets one field wrong)."""
    body = copy.deepcopy(draw(valid_bodies))
    for _ in range(draw(st.integers(1, 3))):
        path = draw(st.sampled_from(_places(body)))
        if not path:
            return draw(junk.map(lambda value: {"results": value}) | broken_values)
        parent = body
        for step in path[:-1]:
            parent = parent[step]
        action = draw(st.sampled_from(["replace", "remove", "add", "duplicate"]))
        if action == "replace":
            parent[path[-1]] = draw(broken_values)
        elif action == "remove" and isinstance(parent, dict):
            del parent[path[-1]]
        elif action == "add" and isinstance(parent, dict):
            parent[draw(st.sampled_from(["extra", "Passed", "passed", "reason"]))] = draw(broken_values)
        elif action == "duplicate" and isinstance(body, dict) and isinstance(body.get("results"), list):
            originals = [item for item in body["results"] if isinstance(item, dict) and "execution_id" in item]
            if originals:
                body["results"].append(dict(originals[0], execution_id=str(originals[0]["execution_id"]).upper()))
    return body


def typed(value: Any) -> Any:
    """`value` with every leaf's type beside it (True == 1 and 1 == 1.0 must not hide a difference)."""
    if isinstance(value, dict):
        return {key: typed(item) for key, item in value.items()}
    if isinstance(value, list):
        return [typed(item) for item in value]
    if isinstance(value, datetime):
        return ("datetime", value, value.utcoffset(), str(value.tzinfo))
    return (type(value).__name__, value)


def serializer_answer(body: Any) -> tuple[bool, Any]:
    serializer = BurnInEvaluationResultsRequestSerializer(data=body)
    valid = serializer.is_valid()
    return valid, serializer.validated_data.get("results") if valid else serializer.errors


@pytest.mark.slow
@settings(max_examples=examples(300), deadline=None)
@given(valid_bodies)
def test_valid_bodies_take_the_hot_path_with_the_serializers_answer(body):
    plain = plainly_valid_results(body, limit=LIMIT)
    valid, answer = serializer_answer(body)
    assert valid, answer
    assert plain is not None
    assert typed(plain) == typed(answer)


@pytest.mark.slow
@settings(max_examples=examples(1000), suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(broken_bodies())
def test_a_broken_body_is_left_to_the_serializer_unless_the_serializer_takes_it_as_well(body):
    plain = plainly_valid_results(body, limit=LIMIT)
    if plain is None:
        return
    valid, answer = serializer_answer(body)
    assert valid, f"the hot path accepted a body the serializer refuses: {answer}"
    assert typed(plain) == typed(answer)


def agent_item(payload: dict[str, Any], offset: timezone = UTC) -> dict[str, Any]:
    return {
        "execution_id": str(uuid.uuid4()),
        "evaluation_result": payload,
        "evaluation_source_key": "ab" * 32,
        "expected_updated_at": datetime(2026, 12, 1, 10, 30, 15, 123456, tzinfo=offset).isoformat(),
    }


def test_what_agents_send_takes_the_hot_path_with_the_serializers_answer():
    payload = failing_payload("busbw_gbps", 400.5, "gte")
    payload["metric_evaluations"]["busbw_gbps"]["statistic_evaluations"] = {
        "p50": {"passed": True, "threshold": "n/a", "comparator": None}
    }
    body = {
        "results": [
            agent_item(passing_payload()),
            agent_item(payload, timezone(timedelta(hours=-5))),
            agent_item({"passed": False, "reason": "  runner crashed \n", "metric_evaluations": {}}),
            agent_item({"passed": False}),
        ]
    }
    plain = plainly_valid_results(json.loads(json.dumps(body)), limit=LIMIT)
    assert plain is not None
    valid, answer = serializer_answer(body)
    assert valid
    assert typed(plain) == typed(answer)
    assert plain[2]["evaluation_result"]["reason"] == "runner crashed"


LEAVES = [
    ("execution_id",),
    ("evaluation_source_key",),
    ("expected_updated_at",),
    ("evaluation_result",),
    ("evaluation_result", "passed"),
    ("evaluation_result", "reason"),
    ("evaluation_result", "metric_evaluations"),
    ("evaluation_result", "metric_evaluations", "busbw_gbps"),
    ("evaluation_result", "metric_evaluations", "busbw_gbps", "passed"),
    ("evaluation_result", "metric_evaluations", "busbw_gbps", "value_evaluation"),
    ("evaluation_result", "metric_evaluations", "busbw_gbps", "statistic_evaluations"),
    *(
        ("evaluation_result", "metric_evaluations", "busbw_gbps", "value_evaluation", k)
        for k in ("passed", "threshold", "comparator")
    ),
    *(
        ("evaluation_result", "metric_evaluations", "busbw_gbps", "statistic_evaluations", "p50", k)
        for k in ("passed", "threshold", "comparator")
    ),
]
LEAF_VALUES = [
    True,
    False,
    0,
    1,
    1.5,
    -2,
    "",
    " x ",
    "x",
    None,
    [],
    {},
    10**400,
    float("nan"),
    float("inf"),
    "gte",
    "GTE",
    "2026-12-01",
    "2026-12-01T10:00:00",
    "0001-01-01T00:00:00+01:00",
    "ab" * 32 + "\n",
    "nul\x00",
    "lone \ud800",
]


@pytest.mark.parametrize("leaf", LEAVES, ids=".".join)
def test_any_value_at_any_place_gets_the_serializers_answer_or_is_left_to_it(leaf):
    """Every place of an agent's item, given each of a table of values: when the serializer refuses
    the body, the hot path must leave it; when the hot path takes it, its answer is the serializer's."""
    for value in LEAF_VALUES:
        payload = failing_payload("busbw_gbps", 400.5, "gte")
        payload["metric_evaluations"]["busbw_gbps"]["statistic_evaluations"] = {
            "p50": {"passed": False, "threshold": 390, "comparator": "gte"}
        }
        item = agent_item(payload)
        parent = item
        for step in leaf[:-1]:
            parent = parent[step]
        parent[leaf[-1]] = value
        body = {"results": [item]}
        plain = plainly_valid_results(body, limit=LIMIT)
        valid, answer = serializer_answer(body)
        if not valid:
            assert plain is None, (
                f"{value!r} at {'.'.join(leaf)}: the serializer refuses ({answer}), the hot path took it"
            )
        elif plain is not None:
            assert typed(plain) == typed(answer), f"{value!r} at {'.'.join(leaf)}"


def test_bodies_the_serializer_must_judge_are_left_to_it():
    item = agent_item(passing_payload())
    duplicate = {"results": [item, dict(item, execution_id=item["execution_id"].upper())]}
    assert serializer_answer(duplicate)[0] is False
    for body in (
        duplicate,
        {"results": [item] * 0 + [agent_item(passing_payload()) for _ in range(3)]},  # over a limit of 2
        {"results": [dict(item, expected_updated_at="2026-12-01T10:00:00")]},  # naive
    ):
        assert plainly_valid_results(body, limit=2) is None


unstorable_text = st.text(st.characters(codec="utf-8") | st.sampled_from(["\x00", "\ud800", "\udfff"]), max_size=6)
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | unstorable_text,
    lambda children: st.lists(children, max_size=3) | st.dictionaries(unstorable_text, children, max_size=3),
    max_leaves=6,
)
number_literals = st.from_regex(r"\A-?(0|[1-9][0-9]{0,3})(\.[0-9]{1,3})?([eE][+-]?[0-9]{1,4})?\Z") | st.integers(
    290, 330
).map(lambda digits: "9" * digits + ".5")


@pytest.mark.slow
@settings(max_examples=examples(400), deadline=None)
@given(json_values, st.booleans())
@example({"key": "lone \ud800"}, True)
@example({"key": "lone \udfff"}, False)
@example(["nul \x00"], True)
@example({"lone \udbff key": 1}, False)
def test_text_the_parser_does_not_walk_cannot_hold_an_unstorable_value(value, ascii_only):
    text = json.dumps(value, ensure_ascii=ascii_only)
    if storable_json_problem(json.loads(text)) is not None:
        assert may_be_unstorable(text)


@pytest.mark.slow
@settings(max_examples=examples(300), deadline=None)
@given(st.lists(number_literals, min_size=1, max_size=3))
def test_no_number_that_overflows_a_double_escapes_the_walk(literals):
    text = "[" + ",".join(literals) + "]"
    if storable_json_problem(json.loads(text)) is not None:
        assert may_be_unstorable(text)
