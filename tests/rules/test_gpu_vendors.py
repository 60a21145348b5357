"""Which vendor a test, a parser or a health metric belongs to (`fleet_rules.gpu_vendors`)."""

from __future__ import annotations

import pytest

from fleet_rules.gpu_vendors import vendor_of_metric, vendor_of_parser, vendor_of_test, wrong_vendor
from fleet_rules.vocabulary import GpuVendor


@pytest.mark.parametrize(
    ("test", "vendor"),
    [
        ("dcgm-diag", GpuVendor.NVIDIA),
        ("nccl-all-reduce-multinode", GpuVendor.NVIDIA),
        ("nvbandwidth", GpuVendor.NVIDIA),
        ("rvs-stress", GpuVendor.AMD),
        ("rvs", GpuVendor.AMD),
        ("rccl-all-reduce", GpuVendor.AMD),
        ("transferbench-a2a", GpuVendor.AMD),
        ("health-window", None),
        ("ib-write-bw", None),
        ("hbm-bandwidth", None),
        ("rvsx", None),  # a tool's name must be followed by `-` or nothing
    ],
)
def test_a_test_named_after_a_tool_is_its_vendors(test, vendor):
    assert vendor_of_test(test) == vendor


def test_parsers_of_one_vendors_tool_and_of_anyones():
    assert vendor_of_parser("nvidia-smi-csv:index,serial") == GpuVendor.NVIDIA
    assert vendor_of_parser("rccl-tests") == GpuVendor.AMD
    assert vendor_of_parser("nccl-all-reduce") is None  # it reads rccl-tests' tables too
    assert vendor_of_parser("ibstat") is None


def test_health_metrics_of_one_vendor_and_the_refusal_in_words():
    assert vendor_of_metric("xid_fatal_count") == GpuVendor.NVIDIA
    assert vendor_of_metric("amdgpu_ras_fatal_count") == GpuVendor.AMD
    assert vendor_of_metric("ecc_uncorrected_delta") is None
    assert wrong_vendor("metric", "x", None, GpuVendor.AMD) is None
    assert wrong_vendor("test", "rvs", GpuVendor.AMD, GpuVendor.AMD) is None
    assert (
        wrong_vendor("parser", "rvs", GpuVendor.AMD, GpuVendor.NVIDIA)
        == "parser 'rvs' is AMD's; this resource class's gpu_vendor is nvidia"
    )
