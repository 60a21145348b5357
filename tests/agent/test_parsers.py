"""Parsers read the tools' real output, keep unmeasured values out, and refuse what they do not recognise."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from fleet_agent.parsers import ParseError, parser_for, summarise
from fleet_agent.parsers.dcgm import parse_diag_json
from fleet_agent.parsers.nccl import parse_all_reduce, parse_all_reduce_rows
from fleet_agent.parsers.nvbandwidth import parse as parse_nvbandwidth
from fleet_agent.parsers.nvidia_smi import parse_query_csv
from fleet_rules.evaluator import evaluate

FIXTURES = Path(__file__).parent / "fixtures"
SMI_FIELDS = [
    "index",
    "remapped_rows.pending",
    "remapped_rows.failure",
    "ecc.errors.uncorrected.volatile.sram",
    "temperature.gpu",
    "clocks.sm",
    "power.draw",
]


def fixture(name: str) -> str:
    return (FIXTURES / name).read_text()


def as_json(metrics: dict[str, Any]) -> dict[str, Any]:
    """Metrics must survive the trip to the API: plain JSON, no NaN."""
    return json.loads(json.dumps(metrics, allow_nan=False))


# --- dcgmi diag ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "failed", "warned", "gpus", "tests"),
    [
        ("dcgm_diag_r3_h200_pass_dcgm3.json", 0, 0, 8, 15),
        ("dcgm_diag_r3_h200_fail_dcgm3.json", 1, 1, 8, 15),
        ("dcgm_diag_r3_gb200_pass_dcgm4.json", 0, 0, 4, 7),
        ("dcgm_diag_r3_gb200_fail_dcgm4.json", 1, 0, 4, 7),
    ],
)
def test_dcgm_diag_counts_failed_and_warned_tests_and_gpus_in_both_json_layouts(
    name: str, failed: int, warned: int, gpus: int, tests: int
) -> None:
    metrics = as_json(parse_diag_json(fixture(name)))

    assert metrics == {
        "diag_failed_tests": {"value": failed},
        "diag_warned_tests": {"value": warned},
        "diag_gpu_count": {"value": gpus},
        "diag_tests_run": {"value": tests},
    }


def test_dcgm_diag_skipped_tests_count_neither_as_failed_nor_warned() -> None:
    text = fixture("dcgm_diag_r3_h200_pass_dcgm3.json")
    assert '"Skip"' in text

    assert parse_diag_json(text)["diag_failed_tests"] == {"value": 0}


def test_dcgm_diag_failed_test_summary_counts_even_without_a_failed_entity() -> None:
    document = {
        "DCGM Diagnostic": {
            "test_categories": [
                {
                    "category": "Stress",
                    "tests": [{"name": "targeted_power", "results": [], "test_summary": {"status": "Fail"}}],
                }
            ]
        }
    }

    assert parse_diag_json(json.dumps(document))["diag_failed_tests"] == {"value": 1}


def test_dcgm_diag_reads_comma_separated_gpu_ids() -> None:
    document = {
        "DCGM GPU Diagnostic": {
            "test_categories": [
                {
                    "category": "Deployment",
                    "tests": [{"name": "Denylist", "results": [{"gpu_ids": "0,1,2,3", "status": "Pass"}]}],
                }
            ]
        }
    }

    assert parse_diag_json(json.dumps(document))["diag_gpu_count"] == {"value": 4}


def test_dcgm_diag_tolerates_text_around_the_json() -> None:
    text = "Successfully ran diagnostic for group.\n" + fixture("dcgm_diag_r3_gb200_pass_dcgm4.json") + "\n"

    assert parse_diag_json(text)["diag_gpu_count"] == {"value": 4}


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (fixture("dcgm_diag_runtime_error_dcgm4.json"), "did not complete: Error: GPU 3 is in use"),
        ("Error: unable to connect to host engine at 127.0.0.1:5555", "no JSON object"),
        ('{"DCGM GPU Diagnostic": {"test_categories": [}', "not valid JSON"),
        ('{"something": {}}', "no 'DCGM GPU Diagnostic'"),
        ('{"DCGM Diagnostic": {"test_categories": []}}', "no test_categories"),
        ('{"DCGM Diagnostic": {"test_categories": [{"category": "Deployment", "tests": []}]}}', "lists no tests"),
        (
            '{"DCGM Diagnostic": {"test_categories": [{"category": "X", "tests": '
            '[{"name": "pcie", "results": [{"entity_id": 0, "status": "Exploded"}]}]}]}}',
            "unknown status 'Exploded'",
        ),
    ],
    ids=["runtime-error", "not-json", "truncated", "wrong-root", "no-categories", "no-tests", "unknown-status"],
)
def test_dcgm_diag_refuses_output_that_is_not_a_finished_diagnostic(text: str, message: str) -> None:
    with pytest.raises(ParseError, match=message):
        parse_diag_json(text)


# --- nccl-tests all_reduce_perf -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        (
            "nccl_all_reduce_h200_8gpu.txt",
            {
                "busbw_gbps": {
                    "value": 476.22,
                    "unit": "GB/s",
                    "statistics": {"min": 475.31, "max": 476.22, "mean": 475.765},
                },
                "avg_busbw_gbps": {"value": 176.8, "unit": "GB/s"},
                "wrong": {"value": 0},
            },
        ),
        (
            "nccl_all_reduce_h200_degraded.txt",
            {
                "busbw_gbps": {
                    "value": 302.35,
                    "unit": "GB/s",
                    "statistics": {"min": 298.26, "max": 302.35, "mean": 300.305},
                },
                "avg_busbw_gbps": {"value": 117.5, "unit": "GB/s"},
                "wrong": {"value": 4},
            },
        ),
    ],
)
def test_all_reduce_reports_bus_bandwidth_at_the_largest_size_and_wrong_results(name: str, expected: dict) -> None:
    assert as_json(parse_all_reduce(fixture(name))) == expected


def test_all_reduce_rows_carry_every_size_with_both_runs() -> None:
    rows = parse_all_reduce_rows(fixture("nccl_all_reduce_h200_8gpu.txt"))

    assert [row["size_bytes"] for row in rows] == [2**exponent for exponent in range(3, 35)]
    assert rows[-1] == {
        "size_bytes": 17179869184,
        "count": 4294967296,
        "type": "float",
        "redop": "sum",
        "root": -1,
        "out_time_us": 63132.0,
        "out_algbw_gbps": 272.13,
        "out_busbw_gbps": 476.22,
        "out_wrong": 0,
        "in_time_us": 63253.0,
        "in_algbw_gbps": 271.61,
        "in_busbw_gbps": 475.31,
        "in_wrong": 0,
        "in_error": None,
        "out_error": None,
    }


NO_VALIDATION = """\
# nThread 1 nGpus 4 minBytes 1048576 maxBytes 8589934592 step: 2(factor) warmup iters: 5 iters: 20 validation: 0
#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong
#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)
  4294967296    1073741824     float     sum      -1   9052.1  474.47  711.70    N/A   9061.0  474.00  711.00    N/A
  8589934592    2147483648     float     sum      -1    18061  475.61  713.41    N/A    18070  475.37  713.06    N/A
# Out of bounds values : 0 OK
# Avg bus bandwidth    : 712.29
"""


def test_all_reduce_without_validation_counts_na_wrong_as_zero() -> None:
    metrics = parse_all_reduce(NO_VALIDATION)

    assert metrics["wrong"] == {"value": 0}
    assert metrics["busbw_gbps"]["value"] == 713.41
    assert parse_all_reduce_rows(NO_VALIDATION)[0]["out_wrong"] is None


def test_all_reduce_reads_mpirun_tagged_output_and_skips_nccl_logs() -> None:
    tagged = "\n".join(
        f"[1,0]<stdout>:{line}" if index % 2 else line
        for index, line in enumerate(
            [
                "a01-n01:4242:4242 [0] NCCL INFO Bootstrap : Using ibp24s0:10.0.1.11<0>",
                *NO_VALIDATION.splitlines(),
            ]
        )
    )

    assert parse_all_reduce(tagged) == parse_all_reduce(NO_VALIDATION)


def test_all_reduce_reads_the_older_table_without_a_root_column() -> None:
    text = """\
#       size         count      type   redop     time   algbw   busbw  error     time   algbw   busbw  error
  1073741824     268435456     float     sum   4200.2  255.64  447.37      0   4195.1  255.95  447.92      0
"""

    rows = parse_all_reduce_rows(text)

    assert rows[0]["root"] is None
    assert parse_all_reduce(text)["busbw_gbps"]["value"] == 447.37
    assert "avg_busbw_gbps" not in parse_all_reduce(text)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (fixture("nccl_all_reduce_failure.txt"), "Test NCCL failure common.cu:961"),
        ("# nThread 1 nGpus 8\n#\n", "no nccl-tests result rows"),
        ("", "no nccl-tests result rows"),
        ("  1024  256  float  sum  -1  20.1  0.05  0.09  0  nan  0.05  0.09  0\n", "unreadable nccl-tests row"),
    ],
    ids=["nccl-failure", "header-only", "empty", "non-finite"],
)
def test_all_reduce_refuses_a_run_that_did_not_produce_a_table(text: str, message: str) -> None:
    with pytest.raises(ParseError, match=message):
        parse_all_reduce(text)


# --- nvbandwidth ----------------------------------------------------------------------------------


def test_nvbandwidth_summarises_each_direction_and_skips_the_diagonal() -> None:
    metrics = as_json(parse_nvbandwidth(fixture("nvbandwidth_h200.txt")))

    assert set(metrics) == {"h2d_gbps", "d2h_gbps", "d2d_gbps"}
    assert metrics["h2d_gbps"] == {
        "value": 55.3725,
        "unit": "GB/s",
        "statistics": {"min": 55.28, "max": 55.45, "mean": 55.3725, "sum": 442.98},
    }
    d2d = metrics["d2d_gbps"]["statistics"]
    assert round(d2d["sum"] / d2d["mean"]) == 8 * 7
    assert d2d["sum"] == 22258.75


def test_nvbandwidth_leaves_out_bidirectional_and_latency_testcases() -> None:
    text = fixture("nvbandwidth_h200.txt")
    assert "Running device_to_device_bidirectional_memcpy_write_ce." in text
    assert "Running device_to_device_latency_sm." in text

    d2d = parse_nvbandwidth(text)["d2d_gbps"]["statistics"]

    assert 397 < d2d["min"] <= d2d["max"] < 398


def test_nvbandwidth_degraded_nvlink_shows_in_the_d2d_minimum_and_fails_its_threshold() -> None:
    metrics = parse_nvbandwidth(fixture("nvbandwidth_h200_degraded_nvlink.txt"))

    result = evaluate(
        status="completed",
        metrics=metrics,
        rules=[
            {"metric": "d2d_gbps", "statistic": "min", "comparator": "gte", "threshold": 335},
            {"metric": "h2d_gbps", "statistic": "min", "comparator": "gte", "threshold": 48},
        ],
    )

    assert metrics["d2d_gbps"]["statistics"]["min"] == 183.74
    assert result["passed"] is False
    assert result["reason"] == "d2d_gbps.min: 183.74 is not ≥ 335"


def test_nvbandwidth_pools_ce_and_sm_runs_of_one_direction() -> None:
    text = """\
Running host_to_device_memcpy_ce.
memcpy CE CPU(row) -> GPU(column) bandwidth (GB/s)
           0         1
 0     55.00     56.00

SUM host_to_device_memcpy_ce 111.00
Running host_to_device_memcpy_sm.
memcpy SM CPU(row) -> GPU(column) bandwidth (GB/s)
           0         1
 0     50.00     51.00

SUM host_to_device_memcpy_sm 101.00
"""

    assert parse_nvbandwidth(text) == {
        "h2d_gbps": {
            "value": 53.0,
            "unit": "GB/s",
            "statistics": {"min": 50.0, "max": 56.0, "mean": 53.0, "sum": 212.0},
        }
    }


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("nvbandwidth Version: v0.7\n", "no host_to_device"),
        (
            "Running host_to_device_memcpy_ce.\n[CUDA_ERROR_LAUNCH_FAILED] in expression cuStreamSynchronize(stream)\n",
            "error in host_to_device_memcpy_ce",
        ),
        (
            "Running host_to_device_memcpy_ce.\nmemcpy CE CPU(row) -> GPU(column) bandwidth (GB/s)\n"
            "           0         1\n 0     55.00\n",
            "row 0 has 1 cells for 2 columns",
        ),
        (
            "Running host_to_device_memcpy_ce.\nmemcpy CE CPU(row) -> GPU(column) bandwidth (GB/s)\n"
            "           0         1\n 0     55.00      fast\n",
            "unreadable cell 'fast'",
        ),
        ("memcpy CE CPU(row) -> GPU(column) bandwidth (GB/s)\n  0\n 0  55.0\n", "without a 'Running"),
    ],
    ids=["no-matrix", "cuda-error", "ragged-row", "bad-cell", "no-testcase"],
)
def test_nvbandwidth_refuses_output_without_a_readable_bandwidth_matrix(text: str, message: str) -> None:
    with pytest.raises(ParseError, match=message):
        parse_nvbandwidth(text)


# --- nvidia-smi --query-gpu ------------------------------------------------------------------------


def test_nvidia_smi_healthy_h200_reports_every_numeric_field_over_eight_gpus() -> None:
    metrics = as_json(parse_query_csv(fixture("nvidia_smi_h200_healthy.csv"), SMI_FIELDS))

    assert metrics == {
        "gpu_count": {"value": 8},
        "ecc_pending_row_remaps": {"value": 0, "statistics": {"min": 0, "max": 0, "mean": 0.0}},
        "ecc_row_remap_failures": {"value": 0, "statistics": {"min": 0, "max": 0, "mean": 0.0}},
        "sram_uncorrectable_errors": {"value": 0, "statistics": {"min": 0, "max": 0, "mean": 0.0}},
        "gpu_temp_c": {"unit": "C", "value": 36, "statistics": {"min": 31, "max": 36, "mean": 33.0}},
        "sm_clock_mhz": {"unit": "MHz", "value": 1980, "statistics": {"min": 1980, "max": 1980, "mean": 1980.0}},
        "power_draw_w": {"unit": "W", "value": 127.59, "statistics": {"min": 118.0, "max": 127.59, "mean": 122.795}},
    }


def test_nvidia_smi_pending_remap_is_counted_and_an_na_counter_fails_closed() -> None:
    metrics = parse_query_csv(fixture("nvidia_smi_h200_pending_remap.csv"), SMI_FIELDS)

    result = evaluate(
        status="completed",
        metrics=metrics,
        rules=[
            {"metric": "ecc_pending_row_remaps", "statistic": "max", "comparator": "eq", "threshold": 0},
            {"metric": "sram_uncorrectable_errors", "statistic": "max", "comparator": "eq", "threshold": 0},
            {"metric": "gpu_count", "statistic": None, "comparator": "eq", "threshold": 8},
        ],
    )

    assert metrics["ecc_pending_row_remaps"]["statistics"]["max"] == 1
    assert metrics["sram_uncorrectable_errors"] == {}
    assert result["reason"] == (
        "ecc_pending_row_remaps.max: 1 is not = 0; sram_uncorrectable_errors.max: statistic missing"
    )


def test_nvidia_smi_reads_noheader_nounits_output_by_the_queried_field_order() -> None:
    metrics = parse_query_csv(fixture("nvidia_smi_gb200_noheader_nounits.csv"), SMI_FIELDS)

    assert metrics["gpu_count"] == {"value": 4}
    assert metrics["gpu_temp_c"] == {"unit": "C", "value": 31, "statistics": {"min": 28, "max": 31, "mean": 29.5}}
    assert metrics["power_draw_w"]["unit"] == "W"
    assert metrics["sm_clock_mhz"]["value"] == 1965


def test_nvidia_smi_volatile_and_aggregate_counters_merge_into_the_worse_per_gpu() -> None:
    text = """\
index, ecc.errors.uncorrected.volatile.sram, ecc.errors.uncorrected.aggregate.sram
0, 0, 2
1, 1, 0
"""

    metrics = parse_query_csv(
        text, ["index", "ecc.errors.uncorrected.volatile.sram", "ecc.errors.uncorrected.aggregate.sram"]
    )

    assert metrics["sram_uncorrectable_errors"] == {"value": 2, "statistics": {"min": 1, "max": 2, "mean": 1.5}}


def test_nvidia_smi_text_fields_give_no_metric_and_unknown_numeric_fields_keep_their_name() -> None:
    text = "index, name, pcie.link.gen.current\n0, NVIDIA H200, 5\n1, NVIDIA H200, 4\n"

    metrics = parse_query_csv(text, ["index", "name", "pcie.link.gen.current"])

    assert metrics == {
        "gpu_count": {"value": 2},
        "pcie_link_gen_current": {"value": 5, "statistics": {"min": 4, "max": 5, "mean": 4.5}},
    }


@pytest.mark.parametrize(
    ("text", "fields", "message"),
    [
        (fixture("nvidia_smi_driver_failure.txt"), SMI_FIELDS, "couldn't communicate with the NVIDIA driver"),
        ("No devices were found\n", SMI_FIELDS, "No devices were found"),
        ('Field "remapped_rows.bogus" is not a valid field to query.\n', ["remapped_rows.bogus"], "not a valid field"),
        ("index, temperature.gpu\n", ["index", "temperature.gpu"], "no GPU rows"),
        ("index, temperature.gpu\n0, 31, 7\n", ["index", "temperature.gpu"], "3 columns for 2 queried fields"),
        ("index, temperature.gpu\n", ["index", "temperature.gpu", "power.draw"], "2 columns for 3"),
        ("GPU-3f2a, 31\n", ["index", "temperature.gpu"], "does not start with a GPU index"),
    ],
    ids=["driver", "no-devices", "bad-field", "header-only", "extra-column", "short-header", "not-an-index"],
)
def test_nvidia_smi_refuses_output_that_is_not_the_queried_table(text: str, fields: list[str], message: str) -> None:
    with pytest.raises(ParseError, match=message):
        parse_query_csv(text, fields)


# --- the registry and shared helpers ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "fixture_name", "metric"),
    [
        ("dcgm-diag-json", "dcgm_diag_r3_h200_pass_dcgm3.json", "diag_failed_tests"),
        ("nccl-all-reduce", "nccl_all_reduce_h200_8gpu.txt", "busbw_gbps"),
        ("nvbandwidth", "nvbandwidth_h200.txt", "d2d_gbps"),
        ("nvidia-smi-csv:" + ",".join(SMI_FIELDS), "nvidia_smi_h200_healthy.csv", "ecc_pending_row_remaps"),
    ],
)
def test_parser_names_resolve_to_the_parser_for_that_tool(name: str, fixture_name: str, metric: str) -> None:
    assert metric in parser_for(name)(fixture(fixture_name))


@pytest.mark.parametrize(("name", "message"), [("iperf", "unknown parser"), ("nvidia-smi-csv:", "needs the queried")])
def test_an_unknown_parser_name_is_refused(name: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parser_for(name)


def test_summarise_refuses_an_empty_list_instead_of_inventing_statistics() -> None:
    with pytest.raises(ValueError, match="no values"):
        summarise([])


# --- real outputs across tool versions (tests/agent/fixtures/SOURCES.md) ----------------------------
# Each test below names the breakage of the first parsers it guards against.


@pytest.mark.parametrize(
    ("name", "busbw", "max_error"),
    [
        ("nccl_2.10_a10g_float_error.txt", 0.0, 0.0),
        ("nccl_2.11_sharp_128gpu_float_error.txt", 2.15, 1e-06),
        ("nccl_2.6era_all_reduce_then_broadcast.txt", 20.34, 0.0),
    ],
)
def test_nccl_tests_up_to_2_11_print_the_error_column_as_a_float_and_it_reads(
    name: str, busbw: float, max_error: float
) -> None:
    """Breakage 1: releases from 2017 to mid-2022 print `error` as `1e-06`; those tables were refused."""
    metrics = parse_all_reduce(fixture(name))

    assert metrics["busbw_gbps"]["value"] == busbw
    assert metrics["max_error"] == {"value": max_error}


def test_an_old_table_takes_its_wrong_count_from_the_out_of_bounds_footer_or_leaves_it_out() -> None:
    with_footer = parse_all_reduce(fixture("nccl_2.10_a10g_float_error.txt"))
    without_footer = parse_all_reduce(fixture("nccl_2.11_sharp_128gpu_float_error.txt"))

    assert with_footer["wrong"] == {"value": 0}
    assert with_footer["avg_busbw_gbps"] == {"value": 0.0, "unit": "GB/s"}
    assert "wrong" not in without_footer  # unknown is not zero: a rule on `wrong` fails closed
    assert (
        evaluate(
            status="completed", metrics=without_footer, rules=[{"metric": "wrong", "comparator": "eq", "threshold": 0}]
        )["passed"]
        is False
    )


def test_nccl_tests_2_13_plus_wrong_counts_printed_with_g_are_data_corruption_not_an_error() -> None:
    """Breakage 2: `#wrong` is `%g`: 2147483648 wrong elements print as 2.14748e+09 and `int()` raised."""
    healthy = parse_all_reduce(fixture("nccl_2.13plus_h100_2node.txt"))
    corrupted = parse_all_reduce(fixture("nccl_2.13plus_h100_2node_corrupted.txt"))

    assert healthy["wrong"] == {"value": 0}
    assert healthy["busbw_gbps"]["value"] == 338.82
    assert corrupted["wrong"] == {"value": 2 * 2147480000}
    result = evaluate(
        status="completed", metrics=corrupted, rules=[{"metric": "wrong", "comparator": "eq", "threshold": 0}]
    )
    assert result["passed"] is False and result["reason"] == "wrong: 4294960000 is not = 0"


def test_a_log_of_several_collectives_is_read_for_the_one_the_requirement_names() -> None:
    """Breakage 3: all_reduce then alltoall in one log; busbw came from whichever table ran last."""
    text = fixture("nccl_rccl_all_reduce_then_alltoall_named.txt")

    all_reduce = parse_all_reduce(text)
    alltoall = parse_all_reduce(text, {"collective": "alltoall_perf"})

    assert all_reduce["busbw_gbps"] == {
        "value": 406.76,
        "unit": "GB/s",
        "statistics": {"min": 406.73, "max": 406.76, "mean": 406.745},
    }
    assert all_reduce["avg_busbw_gbps"] == {"value": 273.886, "unit": "GB/s"}
    assert alltoall["busbw_gbps"]["value"] == 361.41
    assert alltoall["wrong"] == {"value": 0}  # in-place N/A counts as none
    with pytest.raises(ParseError, match="all_reduce, alltoall tables but no sendrecv table"):
        parse_all_reduce(text, {"collective": "sendrecv"})


def test_a_log_of_several_tables_that_do_not_all_name_their_collective_is_refused() -> None:
    a10g = fixture("nccl_2.10_a10g_float_error.txt")
    text = a10g + "root@ip-10-0-139-244:/workspace/nccl-tests/build# mpirun -np 1 sendrecv_perf -b 8 -e 128M\n" + a10g

    with pytest.raises(ParseError, match=r"2 result tables \(unnamed, sendrecv\) and not every one names"):
        parse_all_reduce(text)


def test_the_parser_registry_passes_the_collective_parameter_to_nccl() -> None:
    parse = parser_for("nccl-all-reduce")

    assert (
        parse(fixture("nccl_rccl_all_reduce_then_alltoall_named.txt"), {"collective": "alltoall"})["busbw_gbps"][
            "value"
        ]
        == 361.41
    )


def test_dcgm_3_json_with_null_tests_is_read_and_the_holes_are_skipped() -> None:
    """Breakage 4: DCGM 3.x leaves `null` holes in `tests`; the whole run was refused as malformed."""
    with_nulls = parse_diag_json(fixture("dcgm_diag_r3_t400_null_tests_dcgm3.3.1.json"))

    assert with_nulls == parse_diag_json(fixture("dcgm_diag_r3_t400_skip_dcgm3.3.1.json"))
    assert with_nulls == {
        "diag_failed_tests": {"value": 0},
        "diag_warned_tests": {"value": 0},
        "diag_gpu_count": {"value": 1},
        "diag_tests_run": {"value": 5},
    }


@pytest.mark.parametrize(
    ("name", "failed", "warned"),
    [("dcgm_diag_r1_pass_dcgm2.json", 0, 0), ("dcgm_diag_r1_fail_dcgm2.json", 1, 1)],
)
def test_dcgm_2_layout_without_gpu_ids_counts_failed_and_warned_tests(name: str, failed: int, warned: int) -> None:
    metrics = parse_diag_json(fixture(name))

    assert metrics["diag_failed_tests"] == {"value": failed}
    assert metrics["diag_warned_tests"] == {"value": warned}
    assert metrics["diag_tests_run"] == {"value": 9}


def test_dcgm_a_null_category_is_still_refused() -> None:
    with pytest.raises(ParseError, match="category without a tests list"):
        parse_diag_json('{"DCGM GPU Diagnostic": {"test_categories": [null]}}')


def test_nvidia_smi_hex_bitmasks_read_as_integers_not_zero() -> None:
    """Breakage 5a: `0x00000000000001FF` read as 0, so a rule on a clock-event bitmask always passed."""
    metrics = parse_query_csv(
        fixture("nvidia_smi_gtx1080_throttle_supported.csv"), ["clocks_throttle_reasons.supported"]
    )
    active = parse_query_csv("clocks_event_reasons.active\n0x0000000000000001\n", ["clocks_event_reasons.active"])

    assert metrics["clocks_throttle_reasons_supported"]["value"] == 0x1FF
    assert active["clocks_event_reasons_active"]["value"] == 1
    assert (
        evaluate(
            status="completed",
            metrics=active,
            rules=[{"metric": "clocks_event_reasons_active", "comparator": "eq", "threshold": 0}],
        )["passed"]
        is False
    )


A100_FIELDS = [
    "timestamp", "name", "pci.bus_id", "driver_version", "pstate", "pcie.link.gen.max", "pcie.link.gen.current",
    "temperature.gpu", "utilization.gpu", "utilization.memory", "memory.total", "memory.free", "memory.used",
]  # fmt: skip


def test_nvidia_smi_bus_ids_and_driver_versions_are_text_never_numbers() -> None:
    """Breakage 5b: `pci.bus_id` 00000000:3B:00.0 read as 0 and driver_version 545.23.08 as 545.23."""
    metrics = parse_query_csv(fixture("nvidia_smi_a100_usage_noheader.csv"), A100_FIELDS)
    summary = parse_query_csv(
        fixture("nvidia_smi_rtx5060ti_summary.csv"), ["index", "name", "pci.bus_id", "driver_version", "memory.total"]
    )

    for parsed in (metrics, summary):
        assert not {"pci_bus_id", "driver_version", "name", "timestamp"} & set(parsed)
    assert metrics["gpu_temp_c"]["statistics"] == {"min": 42, "max": 44, "mean": 43.0}
    assert metrics["memory_total_mib"] == {
        "unit": "MiB",
        "value": 40960,
        "statistics": {"min": 40960, "max": 40960, "mean": 40960.0},
    }
    assert summary == {
        "gpu_count": {"value": 2},
        "memory_total_mib": {
            "unit": "MiB",
            "value": 16311,
            "statistics": {"min": 16311, "max": 16311, "mean": 16311.0},
        },
    }
    two_part = parse_query_csv("driver_version, temperature.gpu\n460.91, 40\n", ["driver_version", "temperature.gpu"])
    assert "driver_version" not in two_part and two_part["gpu_temp_c"]["value"] == 40


def test_nvbandwidth_v0_1_zero_diagonal_is_not_a_measurement() -> None:
    """Breakage 5c: v0.1 prints 0.00 on the device-to-device diagonal; it made min 0 and the mean too low."""
    d2d = parse_nvbandwidth(fixture("nvbandwidth_v0.1_readme_zero_diagonal.txt"))["d2d_gbps"]

    assert d2d["statistics"]["min"] == 274.89
    assert d2d["statistics"]["max"] == 276.76
    assert round(d2d["statistics"]["sum"] / d2d["statistics"]["mean"]) == 8 * 7


def test_nvbandwidth_v0_2_reads_host_device_matrices() -> None:
    metrics = parse_nvbandwidth(fixture("nvbandwidth_v0.2_rtx4090.txt"))

    # The cells are rounded to two decimals, the SUM line was summed before rounding.
    assert abs(metrics["h2d_gbps"]["statistics"]["sum"] - 205.04) < 0.05
    assert abs(metrics["d2h_gbps"]["statistics"]["sum"] - 214.28) < 0.05
    assert metrics["h2d_gbps"]["statistics"]["min"] == 23.90


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("nvbandwidth_v0.7_a100_assert.txt", "Invalid value when checking the pattern"),
        ("nvbandwidth_v0.4_l40s_pattern_abort.txt", "error in one_to_all_read_sm"),
    ],
)
def test_nvbandwidth_assertions_and_pattern_errors_are_errors(name: str, message: str) -> None:
    """Breakage 5d: ASSERT / pattern-check failures were not recognised as errors."""
    with pytest.raises(ParseError, match=message):
        parse_nvbandwidth(fixture(name))


@pytest.mark.parametrize(
    "error_line",
    [
        "ASSERT in expression h_errorFlag == 0 in void memcmpPatternHelper() : memcpy.cpp:165",
        "NVML_ERROR: [Unknown Error] in expression nvmlDeviceGetHandleByIndex(i, &device) : common.cpp:12",
        "[cudaErrorPeerAccessUnsupported] peer access is not supported in expression cudaDeviceEnablePeerAccess",
    ],
    ids=["assert", "nvml", "cuda-runtime"],
)
def test_nvbandwidth_an_error_after_good_matrices_still_fails_the_run(error_line: str) -> None:
    text = fixture("nvbandwidth_v0.2_rtx4090.txt") + "\nRunning device_to_device_memcpy_read_ce.\n" + error_line + "\n"

    with pytest.raises(ParseError, match="error in device_to_device_memcpy_read_ce"):
        parse_nvbandwidth(text)
