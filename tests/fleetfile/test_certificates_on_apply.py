"""A threshold tightened through `fleet apply` supersedes exactly the certificates whose evidence
no longer passes (`failed`); the others are re-issued at the new policy version."""

from __future__ import annotations

import pytest

from fleet.burnin.models import AcceptanceCertificate, TestExecution
from fleet.fleetfile.apply import fleet_apply
from fleet.fleetfile.document import parse_text
from fleet.inventory.models import Device
from fleet.policies.models import Requirement
from tests.builders import FleetBuilder
from tests.burnin.certs import current, evaluate_now, sweep

#: Measured bandwidth per device: the fleet file below asks gte 3.0, the candidate gte 3.4.
BANDWIDTH = {"n1": 3.1, "n2": 3.3, "n3": 3.5, "n4": 3.7}


def fleet_file(threshold: float, diag_valid_for: str | None = None) -> str:
    devices = "\n".join(
        f"      - {{hostname: {h}, serial: S{h}, resource_class: gpu.x, state: burn_in, enrolled: true}}"
        for h in BANDWIDTH
    )
    valid_for = f"\n        evidence_valid_for: {diag_valid_for}" if diag_valid_for else ""
    return f"""
sites:
  - slug: lon-1
    satellites: [{{name: sat-a}}]
    devices:
{devices}
policies:
  - resource_class: gpu.x
    requirements:
      - name: gpu-diag
        gate: burn-in
        test: dcgm-diag{valid_for}
        thresholds: [{{metric: diag_failed_tests, comparator: eq, threshold: 0}}]
      - name: hbm-bandwidth
        gate: burn-in
        test: nvbandwidth
        thresholds: [{{metric: hbm_tbps, statistic: min, comparator: gte, threshold: {threshold}}}]
"""


def burn_in(fleet: FleetBuilder) -> dict[str, TestExecution]:
    """Apply the file, run both tests on every device, evaluate and sweep: all four certified."""
    fleet_apply(document=parse_text(fleet_file(3.0)))
    diag = Requirement.objects.get(name="gpu-diag")
    hbm = Requirement.objects.get(name="hbm-bandwidth")
    executions = {}
    for device in Device.objects.order_by("hostname"):
        fleet.execution(diag, device=device, metrics={"diag_failed_tests": {"value": 0}})
        value = BANDWIDTH[device.hostname]
        executions[device.hostname] = fleet.execution(
            hbm, device=device, metrics={"hbm_tbps": {"value": value, "statistics": {"min": value}}}
        )
    evaluate_now(*TestExecution.objects.all())
    sweep(Device.objects.first().satellite, "gpu.x")
    assert AcceptanceCertificate.objects.filter(superseded_at__isnull=True).count() == 4
    return executions


@pytest.mark.django_db
def test_a_tightened_threshold_supersedes_exactly_the_certificates_whose_evidence_no_longer_passes(fleet):
    burn_in(fleet)
    before = {d.hostname: current(d) for d in Device.objects.all()}

    summary = fleet_apply(document=parse_text(fleet_file(3.4)))
    assert summary.policy_versions == {"gpu.x": (1, 2)}
    satellite = Device.objects.first().satellite
    # Until the agent re-evaluates against the new thresholds, nothing is judged at version 2.
    sweep(satellite, "gpu.x")
    assert AcceptanceCertificate.objects.filter(superseded_at__isnull=False).count() == 0

    evaluate_now(*TestExecution.objects.all())
    sweep(satellite, "gpu.x")

    superseded = {
        c.document["device"]["hostname"]: c.supersede_reason
        for c in AcceptanceCertificate.objects.filter(superseded_at__isnull=False)
    }
    assert superseded == {"n1": "failed", "n2": "failed", "n3": "policy_changed", "n4": "policy_changed"}
    for hostname in ("n3", "n4"):
        renewed = current(Device.objects.get(hostname=hostname))
        assert renewed.policy_version == 2
        assert renewed.previous_id == before[hostname].serial
        hbm = next(r for r in renewed.document["requirements"] if r["name"] == "hbm-bandwidth")
        assert hbm["thresholds"][0]["threshold"] == 3.4
    assert current(Device.objects.get(hostname="n1")) is None
    assert current(Device.objects.get(hostname="n2")) is None
