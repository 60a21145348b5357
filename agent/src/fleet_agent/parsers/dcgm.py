"""`dcgmi diag -r <level> -j` output → diagnostic metrics.

DCGM has no published stable schema for this JSON, so the parser accepts the two shapes in the field:
DCGM 3.x (`"DCGM GPU Diagnostic"`, results keyed by `gpu_id`/`gpu_ids`) and DCGM 4.x (`"DCGM Diagnostic"`,
results keyed by `entity_group`/`entity_id`, a `test_summary` per test and an `entity_groups` inventory).

Metrics:
- `diag_failed_tests`: tests with a `Fail` result on any entity (or a failed test summary),
- `diag_warned_tests`: tests with a `Warn` result on any entity (or a warned test summary),
- `diag_gpu_count`: distinct GPUs the diagnostic reported on,
- `diag_tests_run`: tests the diagnostic listed (a level-1 run lists far fewer than a level-3 one).

DCGM 3.x fills its JSON arrays by index (tests by position, results by GPU id), so a run that skipped a
test or a GPU leaves `null` holes in `tests` and `results`: those holes say nothing and are skipped (a
null *category* or a run whose every test is null is still refused).

A `runtime_error` means the diagnostic did not run to the end (GPU busy, host engine gone): that is not
a verdict on the hardware, so it is a `ParseError` and the run is reported as errored.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from fleet_agent.parsers import Metrics, ParseError

__all__ = ["parse_diag_json"]

_ROOTS = ("DCGM GPU Diagnostic", "DCGM Diagnostic")
_STATUSES = frozenset({"pass", "fail", "warn", "skip", "not run"})


def parse_diag_json(text: str) -> Metrics:
    """Count failed and warned diagnostic tests and the GPUs they covered."""
    document = _load(text)
    root = next((document[key] for key in _ROOTS if isinstance(document.get(key), Mapping)), None)
    if root is None:
        raise ParseError("not dcgmi diag JSON: no 'DCGM GPU Diagnostic' (DCGM 3) or 'DCGM Diagnostic' (DCGM 4) object")
    runtime_error = root.get("runtime_error") or document.get("runtime_error")
    if runtime_error:
        raise ParseError(f"dcgmi diag did not complete: {str(runtime_error).strip()}")
    categories = root.get("test_categories")
    if not isinstance(categories, list) or not categories:
        raise ParseError("dcgmi diag JSON has no test_categories")

    failed = warned = tests_seen = 0
    gpus: set[str] = set(_inventory_gpus(document))
    for category in categories:
        tests = category.get("tests") if isinstance(category, Mapping) else None
        if not isinstance(tests, list):
            raise ParseError(f"dcgmi diag category without a tests list: {category!r:.120}")
        for test in tests:
            if test is None:
                continue
            results = test.get("results", []) if isinstance(test, Mapping) else None
            if not isinstance(results, list) or not all(r is None or isinstance(r, Mapping) for r in results):
                raise ParseError(f"dcgmi diag test entry is malformed: {test!r:.120}")
            results = [result for result in results if result is not None]
            name = str(test.get("name", "?"))
            statuses = {_status(result.get("status"), name) for result in results}
            summary = test.get("test_summary")
            if isinstance(summary, Mapping) and summary.get("status") is not None:
                statuses.add(_status(summary["status"], name))
            for result in results:
                gpus.update(_result_gpus(result))
            tests_seen += 1
            failed += int("fail" in statuses)
            warned += int("warn" in statuses)
    if tests_seen == 0:
        raise ParseError("dcgmi diag JSON lists no tests")
    return {
        "diag_failed_tests": {"value": failed},
        "diag_warned_tests": {"value": warned},
        "diag_gpu_count": {"value": len(gpus)},
        "diag_tests_run": {"value": tests_seen},
    }


def _load(text: str) -> Mapping[str, Any]:
    start, end = text.find("{"), text.rfind("}")
    if start < 0 or end < start:
        raise ParseError(f"dcgmi diag output holds no JSON object: {text.strip()[:200]!r}")
    try:
        document = json.loads(text[start : end + 1])
    except json.JSONDecodeError as exc:
        raise ParseError(f"dcgmi diag output is not valid JSON: {exc}") from exc
    if not isinstance(document, Mapping):
        raise ParseError("dcgmi diag JSON is not an object")
    return document


def _status(raw: Any, test: str) -> str:
    status = str(raw).strip().lower() if raw is not None else ""
    if status not in _STATUSES:
        raise ParseError(f"dcgmi diag test {test!r} has an unknown status {raw!r}")
    return status


def _result_gpus(result: Mapping[str, Any]) -> list[str]:
    if "gpu_id" in result:
        return [_gpu_key(result["gpu_id"])]
    if "gpu_ids" in result:
        ids = result["gpu_ids"]
        items = ids.split(",") if isinstance(ids, str) else ids if isinstance(ids, list) else [ids]
        return [_gpu_key(item) for item in items if str(item).strip()]
    if "entity_id" in result and str(result.get("entity_group", "GPU")).upper() == "GPU":
        return [_gpu_key(result["entity_id"])]
    return []


def _inventory_gpus(document: Mapping[str, Any]) -> list[str]:
    """DCGM 4 lists the entities it ran on, which also covers GPUs no test reported on."""
    groups = document.get("entity_groups")
    if not isinstance(groups, list):
        return []
    return [
        _gpu_key(entity["entity_id"])
        for group in groups
        if isinstance(group, Mapping) and str(group.get("entity_group", "")).upper() == "GPU"
        for entity in group.get("entities", [])
        if isinstance(entity, Mapping) and "entity_id" in entity
    ]


def _gpu_key(raw: Any) -> str:
    return str(raw).strip()
