"""The AMD parsers on real outputs of several ROCm generations (tests/agent/fixtures/amd/SOURCES.md), and
each one's refusal of an unreadable output with a ParseError that says why."""

from __future__ import annotations

from pathlib import Path

import pytest

from fleet_agent.parsers import FACT_PARSERS, ParseError, parser_for
from fleet_rules.amdgpu import AmdgpuEventKind
from fleet_rules.xid import XidKind

FIXTURES = Path(__file__).parent / "fixtures" / "amd"


def read(name: str) -> str:
    return (FIXTURES / name).read_text()


def test_every_amd_fixture_is_listed_in_sources():
    listed = read("SOURCES.md")
    missing = [f.name for f in FIXTURES.iterdir() if f.name != "SOURCES.md" and f"`{f.name}`" not in listed]
    assert missing == []


# --- amd-smi static: the inventory -------------------------------------------------------------------------


def test_amd_smi_static_rocm7_reads_the_same_inventory_object_as_nvidia():
    inventory = parser_for("amd-smi-static")(read("amd_smi_static_rocm7_mi350x_derived_from_text.json"))
    assert set(inventory) == {"driver_version", "cuda_version", "gpus"}
    assert inventory["driver_version"] == "6.18.3"
    (gpu,) = inventory["gpus"]
    assert gpu == {
        "uuid": None,
        "serial": "<redacted>",
        "pci_bus_id": "0000:05:00.0",
        "vbios_version": "00154951",
        "part_number": "113-M350-01-1K0-920A",
        "product_name": "AMD Instinct MI350X",
    }
    assert "amd-smi-static" in FACT_PARSERS


def test_amd_smi_static_keeps_what_a_gpu_did_not_report_unknown():
    # the MI210 output reports no slot, no ASIC serial and a board serial of "0"
    inventory = parser_for("amd-smi-static")(read("amd_smi_static_rocm7_mi210_gpu_data.json"))
    (gpu,) = inventory["gpus"]
    assert gpu["product_name"] == "AMD Instinct MI210"
    assert gpu["serial"] is None and gpu["pci_bus_id"] is None
    assert gpu["vbios_version"] == "Mi200 pcie"
    assert len(inventory["driver_version"]) == 64  # the kernel's build string, cut to what the inventory keeps


@pytest.mark.parametrize(
    ("fixture", "reason"),
    [
        ("amd_smi_static_rocm7_mi210_truncated.json", "malformed or truncated"),
        ("amd_smi_static_clock_only_section.json", "has no asic section"),
    ],
)
def test_amd_smi_static_refuses_a_cut_or_sectionless_output(fixture, reason):
    with pytest.raises(ParseError, match=reason):
        parser_for("amd-smi-static")(read(fixture))


def test_amd_smi_static_refuses_a_document_without_gpus_and_hostile_nesting():
    with pytest.raises(ParseError, match="listed no GPU"):
        parser_for("amd-smi-static")('{"gpu_data": []}')
    with pytest.raises(ParseError, match="nested deeper"):
        parser_for("amd-smi-static")("[" * 40 + "]" * 40)


# --- amd-smi metric: ECC and throttle ------------------------------------------------------------------------


def test_amd_smi_metric_sums_ecc_per_gpu_with_the_error_state_gpu_in_statistics():
    metrics = parser_for("amd-smi-metric")(read("amd_smi_metric_rocm7_mi300x_derived_umc_sdma_errors.json"))
    assert metrics["gpu_count"] == {"value": 2}
    assert metrics["ecc_uncorrected"] == {"value": 1, "statistics": {"gpu0": 1, "gpu1": 0}}
    assert metrics["ecc_corrected"]["value"] == 2
    assert metrics["throttle_active"]["value"] == 0


def test_amd_smi_metric_na_counter_has_no_value_and_fails_closed():
    metrics = parser_for("amd-smi-metric")(
        '[{"gpu": 0, "ecc": {"total_correctable_count": 0, "total_uncorrectable_count": "N/A"}}]'
    )
    assert "value" not in metrics["ecc_uncorrected"]
    assert metrics["ecc_uncorrected"]["statistics"] == {"gpu0": None}
    with pytest.raises(ParseError, match="malformed or truncated"):
        parser_for("amd-smi-metric")('[{"gpu": 0, "ecc": {"total_')


# --- rvs -----------------------------------------------------------------------------------------------------


def test_rvs_1x_gst_reads_each_gpus_final_gflops():
    metrics = parser_for("rvs")(read("rvs_1.x_mi355x_gst_fp4.txt"))
    assert metrics["gst_gflops"]["value"] == 1061420.0
    assert metrics["gst_gflops"]["unit"] == "GFLOPS"
    assert metrics["gst_gflops"]["statistics"]["gpu42583"] == 1063560.0
    assert metrics["gst_failed_gpus"] == {"value": 0}


def test_rvs_0x_gst_and_the_iet_failure_of_the_older_layout():
    assert parser_for("rvs")(read("rvs_0.x_gst_legacy.txt"))["gst_gflops"]["value"] == pytest.approx(6521.049418)
    failed = parser_for("rvs")(read("rvs_0.x_iet_power_violation_fail.txt"))
    assert failed["iet_failed_gpus"] == {"value": 1}
    assert failed["rvs_failed"] == {"value": 1}


def test_rvs_iet_pebb_pbqt_peqt_give_metrics_with_units():
    iet = parser_for("rvs")(read("rvs_1.x_mi355x_iet_1400w.txt"))
    assert iet["iet_power_w"]["unit"] == "W" and iet["iet_power_w"]["value"] == 1398.0
    assert iet["iet_failed_gpus"] == {"value": 0}
    pebb = parser_for("rvs")(read("rvs_1.x_mi355x_pebb_h2d.txt"))
    assert pebb["pebb_h2d_gbps"] == {
        "value": 54.034,
        "unit": "GB/s",
        "statistics": {"min": 54.034, "max": 57.71, "mean": 57.089},
    }
    pbqt = parser_for("rvs")(read("rvs_1.x_mi355x_pbqt_xgmi.txt"))
    assert pbqt["pbqt_p2p_gbps"]["value"] == 59.704
    assert parser_for("rvs")(read("rvs_1.x_peqt.txt"))["peqt_failed"] == {"value": 0}


def test_rvs_refuses_an_error_and_a_log_without_results():
    with pytest.raises(ParseError, match="rvs reported an error: gst hipGetDeviceCount failed"):
        parser_for("rvs")(read("rvs_error_no_results.txt"))
    with pytest.raises(ParseError, match="no rvs result line"):
        parser_for("rvs")("RVS starting\n")


# --- rccl-tests ------------------------------------------------------------------------------------------------


def test_rccl_tests_in_node_and_two_node_tables():
    one = parser_for("rccl-tests")(read("rccl_tests_develop_a7809b3_mi300x_8gpu.txt"))
    assert one["busbw_gbps"]["value"] == 315.69 and one["wrong"] == {"value": 0}
    two = parser_for("rccl-tests")(read("rccl_tests_rocm6.4.2_rccl2.22.3_mi300x_2node.txt"))
    assert two["busbw_gbps"]["value"] == 357.46
    assert two["avg_busbw_gbps"] == {"value": 92.3318, "unit": "GB/s"}


def test_a_cut_rccl_tests_log_is_refused_not_read_at_the_largest_size_it_reached():
    """A log cut mid-table (an ssh that dropped) printed rows up to 64 MiB only: its busbw there (271 GB/s) is
    not the run's; rccl-tests always ends with its `# Avg bus bandwidth` footer."""
    with pytest.raises(ParseError, match="cut before its footer"):
        parser_for("rccl-tests")(read("rccl_tests_develop_a7809b3_mi300x_8gpu_truncated.txt"))


def test_amd_smi_metric_cut_mid_document_is_refused():
    with pytest.raises(ParseError, match="malformed or truncated"):
        parser_for("amd-smi-metric")(read("amd_smi_metric_rocm7_mi300x_truncated.json"))


def test_rccl_tests_hip_failure_and_a_table_without_wrong_column_are_refused():
    with pytest.raises(ParseError, match="Test HIP failure"):
        parser_for("rccl-tests")(read("rccl_tests_hip_failure.txt"))
    legacy = (Path(__file__).parent / "fixtures" / "nccl_2.10_a10g_float_error.txt").read_text()
    with pytest.raises(ParseError, match="#wrong"):
        parser_for("rccl-tests")(legacy)


# --- TransferBench -----------------------------------------------------------------------------------------------


def test_transferbench_a2a_summary_gives_average_aggregate_and_slowest_link():
    metrics = parser_for("transferbench")(read("transferbench_mi300x_a2a_acceptance_squeezed.txt"))
    assert metrics["a2a_avg_gbps"] == {"value": 35.776, "unit": "GB/s"}
    assert metrics["a2a_aggregate_gbps"]["value"] == 2003.44
    assert metrics["a2a_min_link_gbps"]["value"] == 28.583


def test_transferbench_cut_before_its_footer_is_refused():
    with pytest.raises(ParseError, match="Average bandwidth"):
        parser_for("transferbench")(read("transferbench_a2a_cut_before_footer.txt"))
    with pytest.raises(ParseError, match="HIP Error"):
        parser_for("transferbench")("TransferBench v1.62.00\n[ERROR] HIP Error: invalid resource handle\n")


# --- kernel log -------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("fixture", "fatal", "ring_timeouts", "resets"),
    [
        ("kernel_log_amdgpu_rocm6.2.3_mi300x_ras_athub.log", 1, 0, 0),
        ("kernel_log_amdgpu_rocm5.7_syslog_sdma_timeout_reset.log", 1, 1, 1),
        ("kernel_log_amdgpu_k6.8_journal_gfx_timeout_reset.log", 1, 1, 1),
        ("kernel_log_amdgpu_k7.0_ring_reset_failed.log", 1, 1, 1),
        ("kernel_log_amdgpu_rdna4_ring_reset_recovered.log", 0, 1, 0),
    ],
)
def test_kernel_log_amdgpu_counts_events_like_xid(fixture, fatal, ring_timeouts, resets):
    metrics = parser_for("kernel-log-amdgpu")(read(fixture))
    assert metrics["amdgpu_ras_fatal_count"]["value"] == fatal
    assert metrics["amdgpu_ring_timeout_count"]["value"] == ring_timeouts
    assert metrics["amdgpu_gpu_reset_count"]["value"] == resets


def test_the_fatal_ras_interrupt_is_an_amdgpu_event_with_its_address():
    from fleet_agent.parsers.kernel_log_amdgpu import parse_amdgpu_events

    first = parse_amdgpu_events(read("kernel_log_amdgpu_rocm6.2.3_mi300x_ras_athub.log"))[0]
    assert first.kind is XidKind.AMDGPU
    assert first.code == AmdgpuEventKind.FATAL_RAS_INTERRUPT
    assert first.pci_bus_id == "0000:1c:00.0"
    assert first.fatal
    assert first.sentence() == "amdgpu event (fatal RAS interrupt (uncorrectable hardware error)) on 0000:1c:00.0"


def test_kernel_log_amdgpu_refuses_a_bad_window_and_oversized_logs():
    with pytest.raises(ParseError, match="not an ISO 8601 time"):
        parser_for("kernel-log-amdgpu")("", {"since": "yesterday"})
    with pytest.raises(ParseError, match="at most"):
        parser_for("kernel-log-amdgpu")("x" * (64 * 1024 * 1024 + 1))
