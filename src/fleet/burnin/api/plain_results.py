"""The hot path of `POST evaluations/results`: a JSON body an agent sends, judged without DRF.

DRF's nested serializers cost about 100 µs an item (profiled: two thirds of a 500-item
request). `plainly_valid_results` accepts only what is plainly valid and returns exactly what
`BurnInEvaluationResultsRequestSerializer` would return for it; anything else (a wrong type, a
missing or unknown key, a duplicate, a form body, too many items) returns None, and the
serializer judges the body and words every error with its dotted path. The schema stays the
serializer's. A property test holds the two to the same answer on generated bodies, valid and
broken.
"""

from __future__ import annotations

import re
from typing import Any
from uuid import UUID

from django.utils import timezone
from django.utils.dateparse import parse_datetime
from rest_framework import ISO_8601
from rest_framework.settings import api_settings

from fleet.core.fields import number_out_of_range
from fleet_rules.vocabulary import Comparator

_ITEM_KEYS = frozenset({"execution_id", "evaluation_result", "evaluation_source_key", "expected_updated_at"})
_PAYLOAD_KEYS = frozenset({"passed", "reason", "metric_evaluations"})
_METRIC_KEYS = frozenset({"passed", "value_evaluation", "statistic_evaluations"})
_CHECK_KEYS = frozenset({"passed", "threshold", "comparator"})
_SOURCE_KEY = re.compile(r"[0-9a-f]{64}")
_UNSTORABLE = re.compile(r"[\x00\ud800-\udfff]")
_COMPARATORS = {str(value): value for value, _label in Comparator.choices}


class _NotPlain(Exception):
    """Not plainly valid: the serializer is to judge the body."""


def plainly_valid_results(data: Any, *, limit: int) -> list[dict[str, Any]] | None:
    """The serializer's `results` for a plainly valid JSON body of at most `limit` items, or None."""
    if type(data) is not dict or data.keys() != {"results"} or api_settings.DATETIME_INPUT_FORMATS != [ISO_8601]:
        return None
    results = data["results"]
    if type(results) is not list or len(results) > limit:
        return None
    zone = timezone.get_current_timezone()
    seen: set[UUID] = set()
    try:
        rows = [_item(item, zone, seen) for item in results]
    except _NotPlain:
        return None
    return rows


def _item(item: Any, zone: Any, seen: set[UUID]) -> dict[str, Any]:
    if type(item) is not dict or item.keys() != _ITEM_KEYS:
        raise _NotPlain
    execution_id, source_key, stamp = item["execution_id"], item["evaluation_source_key"], item["expected_updated_at"]
    if type(execution_id) is not str or type(source_key) is not str or type(stamp) is not str:
        raise _NotPlain
    try:
        uuid = UUID(hex=execution_id)
        parsed = parse_datetime(stamp)
        if parsed is None or parsed.tzinfo is None or parsed.utcoffset() is None:
            raise _NotPlain
        updated_at = parsed.astimezone(zone)
    except (ValueError, TypeError, OverflowError) as exc:
        raise _NotPlain from exc
    if uuid in seen or not _SOURCE_KEY.fullmatch(source_key):
        raise _NotPlain
    seen.add(uuid)
    return {
        "execution_id": uuid,
        "evaluation_result": _payload(item["evaluation_result"]),
        "evaluation_source_key": source_key,
        "expected_updated_at": updated_at,
    }


def _payload(payload: Any) -> dict[str, Any]:
    if type(payload) is not dict or not payload.keys() <= _PAYLOAD_KEYS or type(payload.get("passed")) is not bool:
        raise _NotPlain
    out: dict[str, Any] = {"passed": payload["passed"]}
    if "reason" in payload:
        reason = payload["reason"]
        if reason is not None:
            if type(reason) is not str or _UNSTORABLE.search(reason):
                raise _NotPlain
            reason = reason.strip()  # CharField trims
        out["reason"] = reason
    if "metric_evaluations" in payload:
        metrics = payload["metric_evaluations"]
        if type(metrics) is not dict:
            raise _NotPlain
        out["metric_evaluations"] = {name: _metric(metric) for name, metric in metrics.items()}
    return out


def _metric(metric: Any) -> dict[str, Any]:
    if type(metric) is not dict or not metric.keys() <= _METRIC_KEYS or type(metric.get("passed")) is not bool:
        raise _NotPlain
    out: dict[str, Any] = {"passed": metric["passed"]}
    if "value_evaluation" in metric:
        check = metric["value_evaluation"]
        out["value_evaluation"] = None if check is None else _check(check)
    if "statistic_evaluations" in metric:
        statistics = metric["statistic_evaluations"]
        if statistics is not None:
            if type(statistics) is not dict:
                raise _NotPlain
            statistics = {name: _check(check) for name, check in statistics.items()}
        out["statistic_evaluations"] = statistics
    return out


def _check(check: Any) -> dict[str, Any]:
    if type(check) is not dict or check.keys() != _CHECK_KEYS or type(check["passed"]) is not bool:
        raise _NotPlain
    threshold, comparator = check["threshold"], check["comparator"]
    if (
        threshold is not None
        and type(threshold) is not str
        and (type(threshold) not in (int, float) or number_out_of_range(threshold))
    ):
        raise _NotPlain
    if comparator is not None:
        if type(comparator) is not str or comparator not in _COMPARATORS:
            raise _NotPlain
        comparator = _COMPARATORS[comparator]
    return {"passed": check["passed"], "threshold": threshold, "comparator": comparator}
