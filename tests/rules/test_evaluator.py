"""The evaluator (`fleet_rules.evaluator`, shared by the agent and the service) is fail-closed,
deterministic to the byte, and speaks exactly the spec's payload. (Moved from tests/agent.)"""

from __future__ import annotations

import json
import math
import random
from pathlib import Path
from typing import Any

import pytest
import yaml

from fleet_rules.evaluator import evaluate, payload_json
from fleet_rules.readable import COMPARATOR_SIGNS

SPEC = Path(__file__).resolve().parents[1] / "contract" / "spec" / "evaluation-results-upsert.yaml"


def rule(metric: str, comparator: str, threshold: Any, statistic: str | None = None) -> dict[str, Any]:
    return {"metric": metric, "statistic": statistic, "comparator": comparator, "threshold": threshold}


def completed(metrics: dict[str, Any], *rules: dict[str, Any]) -> dict[str, Any]:
    return evaluate(status="completed", metrics=metrics, rules=list(rules))


@pytest.mark.parametrize(
    ("comparator", "value", "threshold", "passed"),
    [
        ("gt", 432, 431, True),
        ("gt", 431, 431, False),
        ("gt", 430.99, 431, False),
        ("gte", 431, 431, True),
        ("gte", 431.0, 431, True),
        ("gte", 430.999, 431, False),
        ("lt", 84.9, 85, True),
        ("lt", 85, 85, False),
        ("lt", 86, 85, False),
        ("lte", 85, 85, True),
        ("lte", 85.001, 85, False),
        ("lte", -1, 0, True),
        ("eq", 0, 0, True),
        ("eq", 8, 8.0, True),
        ("eq", 1, 0, False),
        ("eq", 7.999, 8, False),
    ],
)
def test_each_comparator_judges_the_value_at_and_around_its_boundary(
    comparator: str, value: float, threshold: float, passed: bool
) -> None:
    result = completed({"m": {"value": value, "unit": "GB/s"}}, rule("m", comparator, threshold))

    assert result["passed"] is passed
    assert result["metric_evaluations"] == {
        "m": {
            "passed": passed,
            "value_evaluation": {"passed": passed, "threshold": threshold, "comparator": comparator},
            "statistic_evaluations": None,
        }
    }
    assert result["reason"] == (None if passed else f"m: {value!r} is not {COMPARATOR_SIGNS[comparator]} {threshold!r}")


@pytest.mark.parametrize(("minimum", "passed"), [(48.2, True), (48, True), (47.9, False)])
def test_a_statistic_rule_compares_the_named_statistic_not_the_value(minimum: float, passed: bool) -> None:
    metrics = {"h2d_gbps": {"value": 55.3, "statistics": {"min": minimum, "max": 55.6}}}

    result = completed(metrics, rule("h2d_gbps", "gte", 48, statistic="min"))

    assert result["passed"] is passed
    assert result["metric_evaluations"]["h2d_gbps"] == {
        "passed": passed,
        "value_evaluation": None,
        "statistic_evaluations": {"min": {"passed": passed, "threshold": 48, "comparator": "gte"}},
    }


@pytest.mark.parametrize(
    ("metrics", "statistic", "why"),
    [
        ({}, None, "metric missing"),
        ({}, "min", "metric missing"),
        ({"busbw_gbps": {"unit": "GB/s"}}, None, "value missing"),
        ({"busbw_gbps": {"value": None}}, None, "value missing"),
        ({"busbw_gbps": {"value": 480.0}}, "min", "statistic missing"),
        ({"busbw_gbps": {"statistics": {"max": 480.0}}}, "min", "statistic missing"),
        ({"busbw_gbps": {"statistics": {"min": None}}}, "min", "statistic missing"),
        ({"busbw_gbps": {"value": math.nan}}, None, "NaN is not a finite number"),
        ({"busbw_gbps": {"statistics": {"min": math.nan}}}, "min", "NaN is not a finite number"),
        ({"busbw_gbps": {"value": math.inf}}, None, "inf is not a finite number"),
        ({"busbw_gbps": {"value": -math.inf}}, None, "-inf is not a finite number"),
        ({"busbw_gbps": {"value": True}}, None, "true is a boolean, not a number"),
        ({"busbw_gbps": {"value": False}}, None, "false is a boolean, not a number"),
        ({"busbw_gbps": {"value": "fast"}}, None, '"fast" is not a number'),
        ({"busbw_gbps": {"value": "480"}}, None, '"480" is not a number'),
        ({"busbw_gbps": {"value": [480]}}, None, "a list is not a number"),
        ({"busbw_gbps": {"statistics": {"min": {"v": 480}}}}, "min", "an object is not a number"),
        ({"busbw_gbps": 480}, None, "metric is not an object"),
        ({"busbw_gbps": {"statistics": [480]}}, "min", "statistics is not an object"),
    ],
)
def test_a_value_that_cannot_be_trusted_fails_its_rule_with_a_reason(
    metrics: dict[str, Any], statistic: str | None, why: str
) -> None:
    result = completed(metrics, rule("busbw_gbps", "gte", 431, statistic=statistic))

    label = "busbw_gbps" if statistic is None else f"busbw_gbps.{statistic}"
    assert result["passed"] is False
    assert result["reason"] == f"{label}: {why}"
    evaluation = result["metric_evaluations"]["busbw_gbps"]
    assert evaluation["passed"] is False
    threshold_result = (
        evaluation["value_evaluation"] if statistic is None else evaluation["statistic_evaluations"][statistic]
    )
    assert threshold_result == {"passed": False, "threshold": 431, "comparator": "gte"}
    assert json.loads(payload_json(result)) == result


def test_nan_value_fails_its_rule_even_against_a_comparator_nan_would_slip_through() -> None:
    """NaN compares false with everything, so a naive `not (nan < 85)` would pass it."""
    result = completed({"gpu_temp_c": {"value": math.nan}}, rule("gpu_temp_c", "lt", 85))

    assert result["passed"] is False
    assert result["reason"] == "gpu_temp_c: NaN is not a finite number"


@pytest.mark.parametrize(
    ("value", "comparator", "passed", "reason"),
    [
        ("H200", "eq", True, None),
        ("H100", "eq", False, 'gpu_model: "H100" is not = "H200"'),
        ("h200", "eq", False, 'gpu_model: "h200" is not = "H200"'),
        ("H200", "gte", False, "gpu_model: string thresholds compare only with eq"),
        ("H200", "lt", False, "gpu_model: string thresholds compare only with eq"),
        (200, "eq", False, 'gpu_model: type mismatch: 200 is not a string like the threshold "H200"'),
        (True, "eq", False, 'gpu_model: type mismatch: true is not a string like the threshold "H200"'),
    ],
)
def test_a_string_threshold_is_compared_only_for_equality_with_a_string(
    value: Any, comparator: str, passed: bool, reason: str | None
) -> None:
    result = completed({"gpu_model": {"value": value}}, rule("gpu_model", comparator, "H200"))

    assert result["passed"] is passed
    assert result["reason"] == reason
    assert result["metric_evaluations"]["gpu_model"]["value_evaluation"] == {
        "passed": passed,
        "threshold": "H200",
        "comparator": comparator,
    }


def test_a_string_value_against_a_numeric_threshold_fails() -> None:
    result = completed({"gpu_count": {"value": "8"}}, rule("gpu_count", "eq", 8))

    assert result["passed"] is False
    assert result["reason"] == 'gpu_count: "8" is not a number'


@pytest.mark.parametrize(
    ("error", "reason"), [("nvidia-smi exited with status 15", "nvidia-smi exited with status 15"), (None, None)]
)
def test_an_errored_execution_fails_with_its_error_and_no_metric_evaluations(
    error: str | None, reason: str | None
) -> None:
    result = evaluate(
        status="errored",
        metrics={"busbw_gbps": {"value": 480.0}},
        rules=[rule("busbw_gbps", "gte", 431)],
        error=error,
    )

    assert result == {"passed": False, "reason": reason or "the execution errored", "metric_evaluations": {}}


def test_a_running_execution_cannot_be_evaluated() -> None:
    with pytest.raises(ValueError, match="running"):
        evaluate(status="running", metrics={}, rules=[])


def test_an_unknown_status_cannot_be_evaluated() -> None:
    with pytest.raises(ValueError, match="unknown execution status"):
        evaluate(status="succeeded", metrics={}, rules=[])


def test_no_rules_fails_closed_with_a_reason_and_no_metric_evaluations() -> None:
    result = completed({"busbw_gbps": {"value": 1.0}})

    assert result == {"passed": False, "reason": "no thresholds to judge against", "metric_evaluations": {}}


def test_one_failing_statistic_fails_its_metric_while_its_other_rules_still_pass() -> None:
    metrics = {
        "busbw_gbps": {"value": 760.0, "statistics": {"min": 690.5, "p99": 790.0}},
        "wrong": {"value": 0},
    }

    result = completed(
        metrics,
        rule("busbw_gbps", "gte", 750),
        rule("busbw_gbps", "gte", 700, statistic="min"),
        rule("busbw_gbps", "lte", 800, statistic="p99"),
        rule("wrong", "eq", 0),
    )

    assert result["passed"] is False
    assert result["reason"] == "busbw_gbps.min: 690.5 is not ≥ 700"
    assert result["metric_evaluations"] == {
        "busbw_gbps": {
            "passed": False,
            "value_evaluation": {"passed": True, "threshold": 750, "comparator": "gte"},
            "statistic_evaluations": {
                "min": {"passed": False, "threshold": 700, "comparator": "gte"},
                "p99": {"passed": True, "threshold": 800, "comparator": "lte"},
            },
        },
        "wrong": {
            "passed": True,
            "value_evaluation": {"passed": True, "threshold": 0, "comparator": "eq"},
            "statistic_evaluations": None,
        },
    }


def test_the_reason_lists_every_failed_rule_in_sorted_order() -> None:
    metrics = {
        "busbw_gbps": {"value": 420.5},
        "d2d_gbps": {"statistics": {"min": 180.25}},
        "h2d_gbps": {"value": 55.0},
    }

    result = completed(
        metrics,
        rule("h2d_gbps", "gte", 48, statistic="min"),
        rule("d2d_gbps", "gte", 335, statistic="min"),
        rule("ecc_pending_row_remaps", "eq", 0, statistic="max"),
        rule("busbw_gbps", "gte", 431),
    )

    assert result["reason"] == (
        "busbw_gbps: 420.5 is not ≥ 431; d2d_gbps.min: 180.25 is not ≥ 335; "
        "ecc_pending_row_remaps.max: metric missing; h2d_gbps.min: statistic missing"
    )


def _reordered(value: Any, rng: random.Random) -> Any:
    if isinstance(value, dict):
        items = list(value.items())
        rng.shuffle(items)
        return {key: _reordered(item, rng) for key, item in items}
    return value


@pytest.mark.parametrize("seed", range(5))
def test_shuffled_rules_and_reordered_metrics_give_byte_identical_output(seed: int) -> None:
    metrics = {
        "busbw_gbps": {"value": 420.5, "unit": "GB/s", "statistics": {"min": 410.0, "max": 430.0, "mean": 420.0}},
        "h2d_gbps": {"value": 55.2, "statistics": {"min": 55.0, "p99": 55.4}},
        "gpu_count": {"value": 8},
        "gpu_model": {"value": "H200"},
    }
    rules = [
        rule("busbw_gbps", "gte", 431),
        rule("busbw_gbps", "gte", 400, statistic="min"),
        rule("busbw_gbps", "lte", 500, statistic="max"),
        rule("h2d_gbps", "gte", 48, statistic="min"),
        rule("h2d_gbps", "gte", 48, statistic="p50"),
        rule("gpu_count", "eq", 8),
        rule("gpu_model", "eq", "H200"),
    ]
    rng = random.Random(seed)
    shuffled_rules = [_reordered(item, rng) for item in rules]
    rng.shuffle(shuffled_rules)

    first = completed(metrics, *rules)
    second = completed(_reordered(metrics, rng), *shuffled_rules)

    assert second == first
    assert payload_json(second) == payload_json(first)
    assert list(second["metric_evaluations"]) == sorted(second["metric_evaluations"])


def test_payload_json_is_compact_sorted_json() -> None:
    result = completed({"m": {"value": 1}}, rule("m", "eq", 1))

    assert payload_json(result) == (
        b'{"metric_evaluations":{"m":{"passed":true,"statistic_evaluations":null,'
        b'"value_evaluation":{"comparator":"eq","passed":true,"threshold":1}}},"passed":true,"reason":null}'
    )


@pytest.mark.parametrize(
    ("bad_rule", "message"),
    [
        (rule("m", "ge", 1), "unknown comparator"),
        (rule("m", "gte", math.nan), "finite"),
        (rule("m", "gte", math.inf), "finite"),
        (rule("m", "eq", True), "number or a string"),
        (rule("m", "eq", None), "number or a string"),
        (rule("", "eq", 1), "metric name"),
        ({"statistic": None, "comparator": "eq", "threshold": 1}, "metric name"),
        (rule("m", "eq", 1, statistic=""), "statistic"),
    ],
)
def test_a_malformed_rule_is_refused_rather_than_judged(bad_rule: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        completed({"m": {"value": 1}}, bad_rule)


def test_two_rules_for_one_metric_and_statistic_are_refused() -> None:
    with pytest.raises(ValueError, match="two threshold rules for m.min"):
        completed({}, rule("m", "gte", 1, statistic="min"), rule("m", "gte", 2, statistic="min"))


def _json_schema(node: Any) -> Any:
    """OpenAPI 3.0 schema → JSON Schema: `nullable` becomes a null alternative, refs point at $defs."""
    if isinstance(node, list):
        return [_json_schema(item) for item in node]
    if not isinstance(node, dict):
        return node
    converted = {
        key: (value.replace("#/components/schemas/", "#/$defs/") if key == "$ref" else _json_schema(value))
        for key, value in node.items()
        if key != "nullable"
    }
    return {"anyOf": [converted, {"type": "null"}]} if node.get("nullable") else converted


@pytest.fixture(scope="module")
def payload_validator() -> Any:
    import jsonschema  # installed with drf-spectacular; a missing one must fail, not skip

    schemas = yaml.safe_load(SPEC.read_text())["components"]["schemas"]
    schema = {"$defs": _json_schema(schemas), "$ref": "#/$defs/BurnInEvaluationResultPayloadSchema"}
    return jsonschema.Draft202012Validator(schema)


@pytest.mark.parametrize(
    "result",
    [
        completed({}),
        completed({"busbw_gbps": {"value": 480.0, "statistics": {"min": 470.0}}}, rule("busbw_gbps", "gte", 431)),
        completed({"m": {"value": math.nan}}, rule("m", "lt", 1), rule("m", "gte", 0, statistic="min")),
        completed({"model": {"value": "H200"}}, rule("model", "eq", "H200")),
        evaluate(status="errored", metrics={}, rules=[], error="boom"),
    ],
    ids=["no-rules", "passing", "failing-nan", "string", "errored"],
)
def test_every_payload_matches_the_spec_schema_and_has_exactly_its_keys(
    result: dict[str, Any], payload_validator: Any
) -> None:
    payload_validator.validate(json.loads(payload_json(result)))
    assert set(result) == {"passed", "reason", "metric_evaluations"}
    for evaluation in result["metric_evaluations"].values():
        assert set(evaluation) == {"passed", "value_evaluation", "statistic_evaluations"}
        results = [evaluation["value_evaluation"], *(evaluation["statistic_evaluations"] or {}).values()]
        assert all(set(item) == {"passed", "threshold", "comparator"} for item in results if item is not None)


@pytest.mark.parametrize("metrics", [None, [], "busbw_gbps=480"])
def test_metrics_that_are_not_an_object_count_as_none_reported(metrics: Any) -> None:
    result = completed(metrics, rule("busbw_gbps", "gte", 431))

    assert result["passed"] is False
    assert result["reason"] == "busbw_gbps: metric missing"
