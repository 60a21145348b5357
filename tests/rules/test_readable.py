"""Values as people read them (`fleet_rules.readable`): one minus sign, comparators as signs, units."""

from __future__ import annotations

from fleet_rules.evidence import RuleOutcome
from fleet_rules.readable import MINUS, margin, metric_unit, number, outcome_text, parameter_items, rule_text, z_text


def test_a_rule_reads_as_a_sign_and_a_unit():
    assert rule_text("busbw_gbps", "gte", 431, "GB/s") == "busbw_gbps ≥ 431 GB/s"
    assert rule_text("diag_failed_tests", "eq", 0) == "diag_failed_tests = 0"
    assert rule_text("fw", "eq", "1.2") == 'fw = "1.2"'


def test_every_negative_number_and_margin_has_the_one_minus_sign():
    assert margin(-0.331) == f"{MINUS}33.1 %" and margin(0.05) == "+5.0 %" and margin(None) == ""
    assert number(-3.5) == f"{MINUS}3.5" and number(-2) == f"{MINUS}2" and number(1e-5) == f"1e{MINUS}05"
    assert "-" not in z_text(-4.23, 3.5) and z_text(-4.23, 3.5) == f"robust z {MINUS}4.2 (beyond k = 3.5)"


def test_a_failing_rule_says_how_the_value_stands_to_what_it_needs():
    failed = RuleOutcome("busbw_gbps", None, "gte", 431, 288.44, False)
    assert outcome_text(failed, "GB/s") == f"busbw_gbps 288.44 GB/s is below ≥ 431 GB/s ({MINUS}33.1 %)"
    missing = RuleOutcome("busbw_gbps", "min", "gte", 431, None, False)
    assert outcome_text(missing, "GB/s") == "busbw_gbps.min missing (needs ≥ 431 GB/s)"


def test_a_unit_is_declared_else_reported_else_named():
    assert metric_unit({"bw": {"unit": "Gb/s"}}, "bw", "GB/s") == "GB/s"
    assert metric_unit({"bw": {"unit": "Gb/s"}}, "bw") == "Gb/s"
    assert metric_unit({}, "busbw_gbps") == "GB/s" and metric_unit({}, "gpu_count") == ""


def test_parameters_read_with_their_units():
    assert parameter_items({"max_bytes": 17179869184, "duration_s": 120, "gpus": 8, "cases": ["a", "b"]}) == [
        ("cases", "a, b"),
        ("duration_s", "120 s"),
        ("gpus", "8"),
        ("max_bytes", "17179869184 bytes (16 GiB)"),
    ]
