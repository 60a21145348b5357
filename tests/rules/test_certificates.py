"""The certificate rules by table: certifiable, supersede reasons, valid_until, the document."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from uuid import uuid4

import pytest

from fleet_rules import certificates as rules
from fleet_rules.vocabulary import SupersedeReason, Verdict

NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
DEVICE = rules.DeviceFacts(uuid4(), "n1", "SN1", "gpu.x", uuid4(), "lon-1", 2, NOW - timedelta(days=3))


def passed(name: str = "diag", **changes) -> rules.RequirementEvidence:
    item = rules.RequirementEvidence(
        requirement_id=uuid4(),
        name=name,
        gate="burn-in",
        scope="single_node",
        target_kind="device",
        target_id=DEVICE.id,
        target_label=None,
        verdict=Verdict.PASSED,
        row_policy_version=2,
        row_source_key="k" * 64,
        execution_id=uuid4(),
        evaluation_passed=True,
        evaluation_source_key="k" * 64,
    )
    return replace(item, **changes)


def held(evidence, **changes) -> rules.CurrentCertificate:
    current = rules.CurrentCertificate(uuid4(), "h" * 64, 2, None, {e.name: e.execution_id for e in evidence})
    return replace(current, **changes)


@pytest.mark.parametrize(
    "changes",
    [
        {"verdict": Verdict.FAILED},
        {"verdict": None},
        {"target_id": None},
        {"row_policy_version": 1},
        {"evaluation_source_key": "x" * 64},
        {"row_source_key": None},
        {"evaluation_passed": False},
    ],
)
def test_one_requirement_short_of_passing_makes_a_device_not_certifiable(changes):
    assert rules.is_certifiable(DEVICE, [passed("a")])
    assert not rules.is_certifiable(DEVICE, [passed("a"), passed("b", **changes)])


def test_no_policy_or_no_requirements_is_not_certifiable():
    assert not rules.is_certifiable(replace(DEVICE, policy_version=None), [passed()])
    assert not rules.is_certifiable(DEVICE, [])


@pytest.mark.parametrize(
    ("changes", "current_changes", "reason"),
    [
        ({"verdict": Verdict.FAILED}, {}, SupersedeReason.FAILED),
        ({"verdict": Verdict.ERRORED}, {}, SupersedeReason.ERRORED),
        ({"verdict": Verdict.EXPIRED}, {}, SupersedeReason.EXPIRED),
        ({}, {"valid_until": NOW}, SupersedeReason.EXPIRED),
        ({}, {"policy_version": 1}, SupersedeReason.POLICY_CHANGED),
        ({"row_policy_version": 1}, {"policy_version": 1}, None),  # awaiting re-evaluation
        ({"verdict": Verdict.IN_PROGRESS}, {}, None),  # a rerun running: the certificate stands
        ({}, {}, None),
    ],
)
def test_supersede_reasons(changes, current_changes, reason):
    evidence = [passed("a"), passed("b")]
    current = held(evidence, **current_changes)
    now_evidence = [evidence[0], replace(evidence[1], **changes)]
    assert rules.supersede_reason(current, DEVICE, now_evidence, now=NOW) == reason


def test_newer_passing_evidence_renews_and_the_decision_issues_a_successor():
    evidence = [passed("a")]
    current = held(evidence)
    newer = [replace(evidence[0], execution_id=uuid4())]
    assert rules.decide(current, DEVICE, newer, now=NOW) == rules.Decision(SupersedeReason.RENEWED, True)
    assert rules.decide(current, DEVICE, evidence, now=NOW) == rules.Decision(None, False)


def test_valid_until_is_the_earliest_expiry_and_an_expired_device_gets_nothing():
    soon, later = NOW + timedelta(days=1), NOW + timedelta(days=9)
    evidence = [passed("a", evidence_valid_until=later), passed("b", evidence_valid_until=soon), passed("c")]
    assert rules.valid_until(evidence) == soon
    assert rules.decide(None, DEVICE, evidence, now=NOW).issue
    assert not rules.decide(None, DEVICE, evidence, now=soon).issue


def test_the_document_is_canonical_and_its_hash_is_of_those_bytes():
    evidence = [passed("b"), passed("a")]
    document = rules.document(serial=uuid4(), device=DEVICE, evidence=evidence, issued_at=NOW, previous_sha256=None)
    assert [r["name"] for r in document["requirements"]] == ["a", "b"]
    assert document["issued_at"] == "2026-12-01T12:00:00.000000Z"
    data = rules.canonical(document)
    assert b" " not in data.split(b'"hostname"')[0]
    assert rules.sha256(data) == rules.sha256(rules.canonical(dict(reversed(list(document.items())))))


def test_a_single_node_pass_counts_only_on_the_devices_current_fingerprint():
    from dataclasses import replace

    from fleet_rules.certificates import on_current_hardware

    single = rules.RequirementEvidence(uuid4(), "gpu-diag", "burn-in", "single_node", "device", uuid4(), None, "passed")
    rack = replace(single, name="rack-nccl", scope="multi_node", target_kind="topology")
    device = replace(DEVICE, fingerprint_sha256="a" * 64)
    assert on_current_hardware(device, replace(single, fingerprint_sha256="a" * 64))
    assert not on_current_hardware(device, replace(single, fingerprint_sha256="b" * 64))
    assert not on_current_hardware(device, single)  # reported no fingerprint, the device has one
    assert on_current_hardware(device, rack)  # a collective reports none
    assert on_current_hardware(DEVICE, single)  # a device without fingerprints: judged as before
