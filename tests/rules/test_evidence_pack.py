"""The evidence pack's manifest rules (`fleet_rules.evidence_pack`), without a database."""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime
from uuid import UUID

import rfc8785

from fleet_rules import evidence_pack as rules

T0 = datetime(2026, 12, 3, 12, 0, tzinfo=UTC)
RULE = {"metric": "busbw", "statistic": "min", "comparator": "gte", "threshold": 431}


def _execution(n: int, **extra) -> rules.ExecutionFacts:
    fields = {
        "id": UUID(int=n),
        "status": "completed",
        "test": "nccl",
        "parameters": {"bytes": 2**60},
        "metrics": {"busbw": {"value": 420.5, "unit": "GB/s", "statistics": {"min": 401.25}}},
        "error": "",
        "started_at": T0,
        "finished_at": T0,
        "created_at": T0,
        "updated_at": T0,
        "job_id": None,
        "evaluation_passed": False,
        "evaluation_reason": "busbw.min below 431",
        "metric_evaluations": {
            "busbw": {"passed": False, "statistic_evaluations": {"min": {"passed": False, "threshold": 431}}}
        },
    }
    return rules.ExecutionFacts(**(fields | extra))


def _manifest(executions, files=None):
    target = rules.FailingTarget(
        requirement="rack-nccl",
        gate="rack-acceptance",
        scope="multi_node",
        test="nccl",
        target_kind="topology",
        target_id=UUID(int=99),
        target_label="rack-a01",
        verdict="failed",
        policy_version=3,
        reconciled_at=T0,
        deciding_execution_id=executions[0].id if executions else None,
        source_key="0" * 64,
        thresholds=[RULE],
        attempts=len(executions) + 5,
        executions=executions,
    )
    device = rules.PackDevice(UUID(int=1), "a01-n04", "SN1", "gpu.h200.8x", UUID(int=2), "lon-1", "burn_in", None)
    return rules.manifest(
        device=device,
        policy=rules.PackPolicy("gpu.h200.8x", 3, None),
        history=[],
        history_total=0,
        repairs=[],
        repairs_total=0,
        targets=[target],
        files=files or {},
        generated_at=T0,
        generated_by="test",
        limits=rules.Limits(),
    )


def test_an_integer_json_cannot_hold_exactly_is_written_as_a_string_so_the_manifest_canonicalises():
    document = _manifest([_execution(1)])
    execution = document["targets"][0]["attempts"]["executions"][0]
    assert execution["parameters"] == {"bytes": str(2**60)}
    assert rules.canonical(document) == rfc8785.dumps(document)


def test_a_target_names_its_thresholds_with_units_and_what_each_attempt_measured():
    document = _manifest([_execution(1), _execution(2, status="errored", evaluation_passed=None, error="boom")])
    target = document["targets"][0]
    assert target["thresholds"] == [{**RULE, "unit": "GB/s"}]
    assert target["measured"] == [
        {"metric": "busbw", "statistic": "min", "value": 401.25, "unit": "GB/s", "passed": False}
    ]
    assert target["attempts"]["count"] == 7 and target["attempts"]["included"] == 2
    newest, errored = target["attempts"]["executions"]
    assert (newest["verdict"], errored["verdict"], errored["error"]) == ("failed", "errored", "boom")
    assert errored["measured"][0]["passed"] is None  # no current evaluation: not claimed either way


def test_file_problems_name_the_file_whose_hash_differs_and_files_not_listed():
    files = {rules.execution_path(UUID(int=1)): b"{}"}
    document = _manifest([_execution(1)], files)
    assert document["files"] == [
        {
            "path": "executions/00000000-0000-0000-0000-000000000001.json",
            "sha256": hashlib.sha256(b"{}").hexdigest(),
            "bytes": 2,
        }
    ]
    assert rules.file_problems(document, files) == []
    changed = {rules.execution_path(UUID(int=1)): b"{ }"}
    assert rules.file_problems(document, changed)[0].startswith(
        "executions/00000000-0000-0000-0000-000000000001.json: SHA-256 differs"
    )
    extra = files | {"../x": b""}
    assert rules.file_problems(document, extra) == ['"../x": in the pack, not listed in the manifest']
