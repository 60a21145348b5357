"""The hardware readers on real outputs of several driver generations: the inventory a certificate binds, the
health counters and Xid/SXid events a burn-in window is judged on, the adapters, the DMI table. Unreadable,
truncated or hostile input is a ParseError naming the reason, never an empty inventory or a zero."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from fleet_agent.executors.tooling import prepare_commands
from fleet_agent.parsers import FACT_PARSERS, PARSER_NAMES, ParseError, parser_for
from fleet_agent.parsers.dmi import parse_dmi, read_dmi_directory
from fleet_agent.parsers.ibstat import parse_ibstat
from fleet_agent.parsers.kernel_log import parse_xid_events, parse_xid_metrics
from fleet_agent.parsers.nvidia_smi_xml import HEALTH_METRICS, parse_health, parse_inventory, throttle_reasons_active
from fleet_rules.evaluator import evaluate
from fleet_rules.xid import XidKind

FIXTURES = Path(__file__).parent / "fixtures"


def fixture(name: str) -> str:
    return (FIXTURES / name).read_text()


def values(metrics: dict[str, Any]) -> dict[str, Any]:
    return {name: entry.get("value") for name, entry in metrics.items()}


def as_json(document: dict[str, Any]) -> dict[str, Any]:
    return json.loads(json.dumps(document, allow_nan=False))


# --- nvidia-smi -q -x: inventory ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "driver", "cuda", "gpus"),
    [
        (
            "nvidia_smi_q_x_r470_gt1030.xml",
            "470.74",
            "11.4",
            [
                {
                    "uuid": "GPU-857c6374-f681-cf3a-f99f-9063a87b8ac0",
                    "serial": None,  # N/A on a GeForce: missing, not invented
                    "pci_bus_id": "00000000:2D:00.0",
                    "vbios_version": "86.08.24.00.23",
                    "part_number": None,
                    "product_name": "NVIDIA GeForce GT 1030",
                }
            ],
        ),
        (
            "nvidia_smi_q_x_r510_p100_ecc_history.xml",
            "510.47.03",
            "11.6",
            [
                {
                    "uuid": "GPU-d3da8716-eaab-75db-efc1-60e88e1cd55e",
                    "serial": "0324217145110",
                    "pci_bus_id": "00000000:00:04.0",
                    "vbios_version": "86.00.52.00.02",
                    "part_number": "900-2H400-6300-031",  # gpu_part_number held the board's before R5xx
                    "product_name": "Tesla P100-PCIE-16GB",
                }
            ],
        ),
        (
            "nvidia_smi_q_x_r510_a100_mig.xml",
            "510.47.03",
            "11.6",
            [
                {
                    "uuid": "GPU-27b94a00-ed54-5c24-b1fd-1054085de32a",
                    "serial": "1324321002473",
                    "pci_bus_id": "00000000:00:04.0",
                    "vbios_version": "92.00.45.00.03",
                    "part_number": "692-2G506-0200-003",
                    "product_name": "NVIDIA A100-SXM4-40GB",
                }
            ],
        ),
        (
            "nvidia_smi_q_x_r535_a100_sxm4.xml",
            "535.54.03",
            "12.2",
            [
                {
                    "uuid": "GPU-513536b6-7d19-9063-b049-1e69664bb298",
                    "serial": "1650522003820",
                    "pci_bus_id": "00000000:01:00.0",
                    "vbios_version": "92.00.36.00.02",
                    "part_number": "692-2G506-0212-002",  # board_part_number, not the chip's 20B2-895-A1
                    "product_name": "NVIDIA A100-SXM4-80GB",
                }
            ],
        ),
        (
            "nvidia_smi_q_x_r590_dual_a5000.xml",
            "590.44.01",
            "13.1",
            [
                {
                    "uuid": "GPU-12345678-aaaa-bbbb-cccc-0123456789ab",
                    "serial": "0123456789012",
                    "pci_bus_id": "00000000:81:00.0",
                    "vbios_version": "94.02.6D.00.0D",
                    "part_number": "900-5G132-1700-000",
                    "product_name": "NVIDIA RTX A5000",
                },
                {
                    "uuid": "GPU-12345678-aaaa-bbbb-cccc-0123456789cd",
                    "serial": "1234567890123",
                    "pci_bus_id": "00000000:C1:00.0",
                    "vbios_version": "94.02.6D.00.0D",
                    "part_number": "900-5G132-1700-000",
                    "product_name": "NVIDIA RTX A5000",
                },
            ],
        ),
    ],
)
def test_the_inventory_lists_each_gpu_in_nvidia_smi_order_across_driver_generations(
    name: str, driver: str, cuda: str, gpus: list[dict[str, Any]]
) -> None:
    inventory = as_json(parse_inventory(fixture(name)))

    assert inventory == {"driver_version": driver, "cuda_version": cuda, "gpus": gpus}


@pytest.mark.parametrize(
    ("name", "reason"),
    [
        ("nvidia_smi_q_x_r590_dual_a5000_truncated.xml", "malformed or truncated"),
        ("nvidia_smi_q_x_entity_expansion.xml", "declares an XML entity; it is refused, never expanded"),
        ("nvidia_smi_q_x_gpu_lost.txt", "did not print XML: 'Unable to determine the device handle"),
        ("nccl_all_reduce_h200_8gpu.txt", "did not print XML"),
    ],
)
def test_a_truncated_hostile_or_failed_nvidia_smi_output_is_refused_with_its_reason(name: str, reason: str) -> None:
    for parse in (parse_inventory, parse_health):
        with pytest.raises(ParseError, match=reason.replace("(", r"\(").replace("'", "'")):
            parse(fixture(name))


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("", "printed nothing"),
        (
            '<?xml version="1.0" ?>\n<nvidia_smi_log><driver_version>550.54.15</driver_version></nvidia_smi_log>',
            "no <gpu>",
        ),
        ("<html><body>proxy error</body></html>", "root element is <html>"),
        (
            '<?xml version="1.0"?><!DOCTYPE x [<!ENTITY e SYSTEM "file:///etc/passwd">]>'
            "<nvidia_smi_log><gpu><serial>&e;</serial></gpu></nvidia_smi_log>",
            "declares an XML entity",
        ),
    ],
)
def test_an_empty_or_foreign_document_is_never_an_empty_inventory(text: str, reason: str) -> None:
    with pytest.raises(ParseError, match=reason):
        parse_inventory(text)


def test_a_cut_exactly_between_two_gpus_is_still_truncation_not_a_one_gpu_inventory() -> None:
    text = fixture("nvidia_smi_q_x_r590_dual_a5000.xml")
    cut = text[: text.index('<gpu id="00000000:C1:00.0">')]

    with pytest.raises(ParseError, match="truncated"):
        parse_inventory(cut)


# --- nvidia-smi -q -x: health -------------------------------------------------------------------


def test_health_reads_the_old_single_double_bit_layout_and_the_retired_pages() -> None:
    metrics = as_json(parse_health(fixture("nvidia_smi_q_x_r510_p100_ecc_history.xml")))

    assert values(metrics) | {} == {
        "gpu_count": 1,
        "ecc_uncorrected_volatile": 0,
        "ecc_uncorrected_aggregate": 0,
        "ecc_corrected_volatile": 0,
        "ecc_corrected_aggregate": 3,  # a GPU with corrected-error history
        "retired_pages_dbe": 0,
        "retired_pages_sbe": 0,
        "retired_pages_pending": 0,
        "row_remap_pending": None,  # Pascal has no row remapper: N/A, not 0
        "row_remap_failure": None,
        "row_remap_correctable": None,
        "row_remap_uncorrectable": None,
        "hw_slowdown_active": 0,
        "hw_thermal_slowdown_active": 0,
        "hw_power_brake_slowdown_active": 0,
        "sw_thermal_slowdown_active": 0,
    }
    assert metrics["ecc_corrected_aggregate"]["statistics"] == {"00000000:00:04.0": 3}


def test_health_of_a_mig_a100_whose_counters_read_na_fails_closed() -> None:
    metrics = parse_health(fixture("nvidia_smi_q_x_r510_a100_mig.xml"))

    assert metrics["ecc_uncorrected_volatile"] == {"statistics": {"00000000:00:04.0": None}}
    assert metrics["row_remap_pending"] == {"statistics": {"00000000:00:04.0": None}}
    assert metrics["ecc_uncorrected_aggregate"]["value"] == 0
    verdict = evaluate(
        status="completed",
        metrics=as_json(metrics),
        rules=[{"metric": "row_remap_pending", "statistic": None, "comparator": "eq", "threshold": 0}],
        error=None,
    )
    assert not verdict["passed"]


def test_health_reads_the_r535_sram_dram_layout() -> None:
    metrics = parse_health(fixture("nvidia_smi_q_x_r535_a100_sxm4.xml"))

    assert values(metrics)["ecc_uncorrected_volatile"] == 0
    assert values(metrics)["ecc_uncorrected_aggregate"] == 0
    assert metrics["retired_pages_dbe"]["statistics"] == {"00000000:01:00.0": None}  # Ampere retires no pages


def test_health_sums_remapped_rows_over_gpus_and_keys_each_gpu_by_bus_id() -> None:
    metrics = parse_health(fixture("nvidia_smi_q_x_r590_dual_a5000.xml"))

    assert metrics["gpu_count"] == {"value": 2}
    assert metrics["row_remap_pending"] == {"value": 0, "statistics": {"00000000:81:00.0": 0, "00000000:C1:00.0": 0}}
    assert metrics["row_remap_failure"]["value"] == 0
    assert "value" not in metrics["ecc_uncorrected_aggregate"]  # ECC disabled on these boards: N/A


def test_the_split_sram_counters_of_r570_plus_are_both_counted() -> None:
    text = fixture("nvidia_smi_q_x_r590_dual_a5000.xml")
    volatile = text.index("<volatile>")
    gpu = text[:volatile] + text[volatile:].replace(
        "<sram_uncorrectable_parity>N/A</sram_uncorrectable_parity>",
        "<sram_uncorrectable_parity>2</sram_uncorrectable_parity>",
        1,
    ).replace(
        "<sram_uncorrectable_secded>N/A</sram_uncorrectable_secded>",
        "<sram_uncorrectable_secded>3</sram_uncorrectable_secded>",
        1,
    ).replace("<dram_uncorrectable>N/A</dram_uncorrectable>", "<dram_uncorrectable>1</dram_uncorrectable>", 1)

    statistics = parse_health(gpu)["ecc_uncorrected_volatile"]["statistics"]

    assert statistics == {"00000000:81:00.0": 6, "00000000:C1:00.0": None}


def test_a_pending_remap_and_an_active_hw_slowdown_are_counted_per_gpu() -> None:
    text = fixture("nvidia_smi_q_x_r590_dual_a5000.xml")
    second = text.index('<gpu id="00000000:C1:00.0">')
    text = text[:second] + text[second:].replace(
        "<remapped_row_pending>No</remapped_row_pending>", "<remapped_row_pending>Yes</remapped_row_pending>", 1
    ).replace(
        "<clocks_event_reason_hw_slowdown>Not Active</clocks_event_reason_hw_slowdown>",
        "<clocks_event_reason_hw_slowdown>Active</clocks_event_reason_hw_slowdown>",
        1,
    )

    metrics = parse_health(text)

    assert metrics["row_remap_pending"] == {"value": 1, "statistics": {"00000000:81:00.0": 0, "00000000:C1:00.0": 1}}
    assert metrics["hw_slowdown_active"]["value"] == 1
    assert throttle_reasons_active(metrics) == ["hw_slowdown"]


def test_throttle_reasons_are_read_under_both_their_names() -> None:
    old = parse_health(fixture("nvidia_smi_q_x_r470_gt1030.xml"))  # clocks_throttle_reasons
    new = parse_health(fixture("nvidia_smi_q_x_r535_a100_sxm4.xml"))  # clocks_event_reasons

    for metrics in (old, new):
        assert all(metrics[f"{reason}_active"]["value"] == 0 for reason in ("hw_slowdown", "sw_thermal_slowdown"))
        assert throttle_reasons_active(metrics) == []


def test_every_health_metric_is_present_on_every_fixture_even_without_a_value() -> None:
    for name in sorted(FIXTURES.glob("nvidia_smi_q_x_r*.xml")):
        if "truncated" in name.name:
            continue
        metrics = parse_health(name.read_text())
        assert set(metrics) == {"gpu_count", *HEALTH_METRICS}, name.name
        as_json(metrics)


# --- kernel log: Xid and SXid -------------------------------------------------------------------


def test_the_2012_format_without_pci_prefix_is_read() -> None:
    (event,) = parse_xid_events(fixture("kernel_log_syslog_2012_xid13_no_pci_prefix.log"))

    assert event.as_json() == {
        "kind": "xid",
        "code": 13,
        "pci_bus_id": "0000:03:00",
        "message": "0003 00000000 00008297 00001098 00000000 00000044",
        "at": None,  # syslog prints no year: no time is guessed
    }
    assert not event.fatal


def test_pid_and_process_name_are_stripped_and_gsp_timeouts_are_fatal() -> None:
    events = parse_xid_events(fixture("kernel_log_dmesg_ctime_xid119.log"))

    assert [(e.code, e.pci_bus_id) for e in events] == [(119, "0000:9b:00")] * 5
    assert events[0].message.startswith("Timeout after 6s of waiting for RPC response from GPU4 GSP!")
    assert parse_xid_metrics(fixture("kernel_log_dmesg_ctime_xid119.log"))["xid_fatal_count"] == {
        "value": 5,
        "statistics": {"0000:9b:00": 5},
    }


def test_dmesg_iso_times_are_read_and_bound_the_window() -> None:
    text = fixture("kernel_log_dmesg_decode_iso_xid13_43.log")
    events = parse_xid_events(text)

    assert len(events) == 17 and {e.code for e in events} == {13, 43}
    assert events[0].at == datetime(2025, 1, 21, 4, 41, 44, 283302, tzinfo=UTC)
    assert events[0].message == "Graphics SM Global Exception on (GPC 8, TPC 5, SM 1): Multiple Warp Errors"
    assert events[-1].message == "Ch 00000008"
    window = parse_xid_metrics(text, {"since": "2025-01-21T04:41:44.285Z", "until": "2025-01-21T04:41:45Z"})
    assert window["xid_count"]["value"] == 3  # the last two Xid 13 and the Xid 43
    assert window["xid_fatal_count"] == {"value": 0, "statistics": {}}  # 13 and 43 are the application's


def test_fallen_off_the_bus_is_fatal_and_an_nvswitch_burst_counts_its_headlines_only() -> None:
    text = fixture("kernel_log_dmesg_xid79_sxid20034.log")
    events = parse_xid_events(text)

    assert events[0].as_json() == {
        "kind": "xid",
        "code": 79,
        "pci_bus_id": "0000:91:00",
        "message": "GPU has fallen off the bus.",
        "at": None,
    }
    sxids = [e for e in events if e.kind is XidKind.SXID]
    assert [(e.pci_bus_id, e.message) for e in sxids] == [
        ("0000:06:00.0", "Fatal, Link 48 LTSSM Fault Up"),
        ("0000:05:00.0", "Fatal, Link 63 LTSSM Fault Up"),
        ("0000:07:00.0", "Fatal, Link 37 LTSSM Fault Up"),
        ("0000:05:00.0", "Fatal, Link 62 LTSSM Fault Up"),
    ]
    assert values(parse_xid_metrics(text)) == {
        "xid_count": 1,
        "xid_fatal_count": 1,
        "sxid_count": 4,
        "sxid_fatal_count": 0,  # 20034 is fatal to the link, not always to the fabric (FM guide)
    }


def test_the_r575_journalctl_gsp_crash_is_an_xid_120() -> None:
    (event,) = parse_xid_events(fixture("kernel_log_journalctl_xid120_r575.log"))

    assert (event.code, event.pci_bus_id, event.fatal) == (120, "0000:02:00", True)
    assert event.message.startswith("GSP task exception: load access page fault")


def test_a_quiet_journal_is_zero_events_not_an_error() -> None:
    metrics = parse_xid_metrics(fixture("kernel_log_journalctl_short_iso_no_xid.log"))

    assert values(metrics) == {"xid_count": 0, "xid_fatal_count": 0, "sxid_count": 0, "sxid_fatal_count": 0}


def test_journalctl_short_iso_times_and_mig_instances_are_read() -> None:
    line = (
        "2025-02-14T05:03:41.123456+0000 gpu-1 kernel: "
        "NVRM: Xid (PCI:0000:3b:00 GPU-I:05): 94, pid=77, name=python, Contained: SM (0x1)."
    )

    (event,) = parse_xid_events(line)

    assert event.as_json() == {
        "kind": "xid",
        "code": 94,
        "pci_bus_id": "0000:3b:00",
        "message": "Contained: SM (0x1).",
        "at": "2025-02-14T05:03:41.123456Z",
    }


def test_an_xid_whose_code_cannot_be_read_is_a_parse_error() -> None:
    with pytest.raises(ParseError, match="sxid whose code cannot be read"):
        parse_xid_events(fixture("kernel_log_sxid_unreadable_code.log"))


def test_a_window_bound_that_is_not_an_aware_time_is_refused() -> None:
    with pytest.raises(ParseError, match="no time zone"):
        parse_xid_metrics("", {"since": "2025-01-01T00:00:00"})


# --- ibstat -------------------------------------------------------------------------------------


def test_ibstat_lists_every_adapter_with_firmware_guid_and_port_states() -> None:
    hcas = parse_ibstat(fixture("ibstat_h100_some_down.txt"))["hcas"]

    assert len(hcas) == 12
    assert hcas[0] == {
        "name": "mlx5_0",
        "firmware_version": "28.39.1002",
        "node_guid": "0x946dae0300cde72c",
        "ports": [{"port": 1, "state": "Active", "rate_gbps": 400}],
    }
    assert [
        (h["name"], h["ports"][0]["state"], h["ports"][0]["rate_gbps"])
        for h in hcas
        if h["ports"][0]["state"] != "Active"
    ] == [
        ("mlx5_2", "Down", 40),
        ("mlx5_7", "Down", 40),
        ("mlx5_8", "Down", 40),
    ]


def test_ibstat_all_active_host() -> None:
    hcas = parse_ibstat(fixture("ibstat_h100_all_active.txt"))["hcas"]

    assert {port["state"] for hca in hcas for port in hca["ports"]} == {"Active"}
    assert hcas[1]["name"] == "mlx5_1" and hcas[1]["firmware_version"] == "22.39.1002"


def test_ibstat_that_panicked_is_refused_though_its_first_blocks_look_complete() -> None:
    with pytest.raises(ParseError, match="ibstat failed: ibpanic: .* stat of IB device 'mlx5_8' failed"):
        parse_ibstat(fixture("ibstat_a100_ibpanic_partial.txt"))


@pytest.mark.parametrize(
    ("text", "reason"),
    [("", "listed no adapter"), ("bash: ibstat: command not found", "before the first CA block")],
)
def test_ibstat_without_adapters_is_refused(text: str, reason: str) -> None:
    with pytest.raises(ParseError, match=reason):
        parse_ibstat(text)


# --- DMI ----------------------------------------------------------------------------------------


def test_dmi_grep_output_gives_bios_and_system_serial() -> None:
    text = "/sys/class/dmi/id/bios_version:2.7.3\n/sys/class/dmi/id/product_serial:J30045XY\n"

    assert parse_dmi(text) == {"bios_version": "2.7.3", "system_serial": "J30045XY", "missing": []}


def test_dmi_an_unreadable_or_placeholder_serial_is_missing_with_its_reason() -> None:
    unprivileged = parse_dmi("/sys/class/dmi/id/bios_version:1.0.4\n")
    oem = parse_dmi("/sys/class/dmi/id/bios_version:1.0.4\n/sys/class/dmi/id/product_serial:To Be Filled By O.E.M.\n")

    assert unprivileged == {
        "bios_version": "1.0.4",
        "system_serial": None,
        "missing": ["dmi: product_serial: not readable"],
    }
    assert oem["system_serial"] is None
    assert oem["missing"] == ["dmi: product_serial: a placeholder, not a value ('To Be Filled By O.E.M.')"]
    with pytest.raises(ParseError, match="no DMI field could be read"):
        parse_dmi("grep: /sys/class/dmi/id/bios_version: No such file or directory\n")


def test_dmi_directory_reader_reports_absent_files(tmp_path: Path) -> None:
    (tmp_path / "bios_version").write_text("U46 v2.72\n")

    assert read_dmi_directory(tmp_path) == {
        "bios_version": "U46 v2.72",
        "system_serial": None,
        "missing": ["dmi: product_serial: absent"],
    }


# --- the registry -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "fixture_name", "key"),
    [
        ("nvidia-smi-xml-inventory", "nvidia_smi_q_x_r535_a100_sxm4.xml", "gpus"),
        ("nvidia-smi-xml-health", "nvidia_smi_q_x_r535_a100_sxm4.xml", "row_remap_pending"),
        ("kernel-log-xid", "kernel_log_dmesg_xid79_sxid20034.log", "xid_fatal_count"),
        ("ibstat", "ibstat_h100_all_active.txt", "hcas"),
    ],
)
def test_the_hardware_parsers_are_registered_by_name(name: str, fixture_name: str, key: str) -> None:
    assert name in PARSER_NAMES
    assert key in parser_for(name)(fixture(fixture_name), {})


def test_a_fact_parser_cannot_be_a_tests_parser() -> None:
    assert {"nvidia-smi-xml-inventory", "amd-smi-static", "ibstat", "dmi-id"} == FACT_PARSERS
    with pytest.raises(ValueError, match="commands.gpu-health.parser: ibstat reads hardware facts"):
        prepare_commands({"gpu-health": {"template": "ibstat", "parser": "ibstat"}})
