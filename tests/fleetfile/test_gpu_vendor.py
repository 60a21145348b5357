"""A resource class declares its GPUs' vendor: the fleet file refuses another vendor's tests and health metrics
for it (naming the field), the vendor round-trips through export, and a vendor change is a new policy version."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
import yaml
from django.core.management import CommandError, call_command

from fleet.fleetfile.apply import fleet_apply
from fleet.fleetfile.document import FleetFileError, parse_text
from fleet.fleetfile.export import fleet_export, to_yaml
from fleet.policies.models import AcceptancePolicy
from fleet_rules.vocabulary import GpuVendor

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "fleet.yaml"

AMD_POLICY = """
policies:
  - resource_class: gpu.mi300x.8x
    gpu_vendor: {vendor}
    requirements:
      - name: stress
        test: {test}
        gate: burn-in
        thresholds:
          - {{metric: {metric}, comparator: eq, threshold: 0}}
parameter_profiles:
  - {{resource_class: gpu.mi300x.8x, test: {profile_test}, parameters: {{}}}}
"""


def amd_policy(
    vendor: str = "amd", test: str = "rvs-stress", metric: str = "rvs_failed", profile_test: str = "rvs-stress"
) -> str:
    return AMD_POLICY.format(vendor=vendor, test=test, metric=metric, profile_test=profile_test)


def problems(text: str) -> list[tuple[str, str]]:
    with pytest.raises(FleetFileError) as caught:
        parse_text(text)
    return caught.value.problems


def test_the_example_declares_the_mi300x_class_amd_and_the_others_nvidia(db):
    fleet_apply(document=parse_text(EXAMPLE.read_text()))
    assert dict(AcceptancePolicy.objects.values_list("resource_class", "gpu_vendor")) == {
        "gpu.gb200.nvl72": GpuVendor.NVIDIA,
        "gpu.h200.8x": GpuVendor.NVIDIA,
        "gpu.mi300x.8x": GpuVendor.AMD,
    }


def test_an_nvidia_test_in_an_amd_class_is_refused_naming_the_field():
    assert problems(amd_policy(test="dcgm-diag")) == [
        ("policies[0].requirements[0].test", "test 'dcgm-diag' is NVIDIA's; this resource class's gpu_vendor is amd")
    ]


def test_an_amd_test_in_a_class_that_says_nothing_is_refused_as_nvidia_is_the_default():
    text = amd_policy(test="rccl-all-reduce").replace("    gpu_vendor: amd\n", "")
    assert problems(text) == [
        (
            "policies[0].requirements[0].test",
            "test 'rccl-all-reduce' is AMD's; this resource class's gpu_vendor is nvidia",
        ),
        ("parameter_profiles[0].test", "test 'rvs-stress' is AMD's; this resource class's gpu_vendor is nvidia"),
    ]


def test_another_vendors_health_metric_and_profile_are_refused():
    found = problems(amd_policy(test="health-window", metric="xid_fatal_count", profile_test="nvbandwidth"))
    assert found == [
        (
            "policies[0].requirements[0].thresholds[0].metric",
            "metric 'xid_fatal_count' is NVIDIA's; this resource class's gpu_vendor is amd",
        ),
        ("parameter_profiles[0].test", "test 'nvbandwidth' is NVIDIA's; this resource class's gpu_vendor is amd"),
    ]


def test_an_unknown_vendor_lists_the_known_ones():
    ((where, message),) = problems(amd_policy(vendor="intel"))
    assert where == "policies[0].gpu_vendor"
    assert "'intel' is not one of: nvidia, amd" in message


def test_the_command_refuses_a_wrong_vendor_file_and_writes_nothing(db, tmp_path):
    path = tmp_path / "fleet.yaml"
    path.write_text(amd_policy(test="nccl-all-reduce"))
    err = io.StringIO()
    with pytest.raises(CommandError, match="1 problem"):
        call_command("apply", "-f", str(path), stderr=err, stdout=io.StringIO())
    assert "policies[0].requirements[0].test: test 'nccl-all-reduce' is NVIDIA's" in err.getvalue()
    assert not AcceptancePolicy.objects.exists()


def test_export_writes_the_vendor_only_where_it_is_not_the_default_and_round_trips(db):
    fleet_apply(document=parse_text(EXAMPLE.read_text()))
    exported = fleet_export()
    vendors = {p["resource_class"]: p.get("gpu_vendor") for p in exported["policies"]}
    assert vendors == {"gpu.gb200.nvl72": None, "gpu.h200.8x": None, "gpu.mi300x.8x": "amd"}
    again = fleet_apply(document=parse_text(to_yaml(exported)))
    assert not again.changed
    assert yaml.safe_load(to_yaml(fleet_export())) == yaml.safe_load(to_yaml(exported))


def test_a_vendor_change_is_a_new_policy_version(db):
    neutral = amd_policy(test="health-window", metric="ecc_uncorrected_delta", profile_test="health-window")
    fleet_apply(document=parse_text(neutral))
    summary = fleet_apply(document=parse_text(neutral.replace("gpu_vendor: amd", "gpu_vendor: nvidia")))
    assert summary.policy_versions == {"gpu.mi300x.8x": (1, 2)}
    assert AcceptancePolicy.objects.get().gpu_vendor == GpuVendor.NVIDIA
