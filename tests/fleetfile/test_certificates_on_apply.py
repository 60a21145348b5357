"""A threshold tightened through `fleet apply` supersedes exactly the certificates whose evidence
no longer passes (`failed`); the others are re-issued at the new policy version; `--what-if` on
the same file predicted exactly those flips."""

from __future__ import annotations

import io
import json

import pytest
from django.core.management import call_command

from fleet.burnin.models import AcceptanceCertificate, PolicyProgress, TestExecution
from fleet.fleetfile.apply import fleet_apply
from fleet.fleetfile.document import parse_text
from fleet.fleetfile.whatif import policy_what_if
from fleet.inventory.models import Device
from fleet.policies.models import AcceptancePolicy, Requirement
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


def verdicts() -> dict[tuple[str, str], str]:
    return {
        (p.requirement.name, p.device.hostname): p.verdict
        for p in PolicyProgress.objects.select_related("requirement", "device")
    }


@pytest.mark.django_db
def test_what_if_predicts_exactly_the_flips_and_supersessions_a_real_apply_then_makes(fleet, tmp_path):
    burn_in(fleet)
    candidate = tmp_path / "candidate.yaml"
    candidate.write_text(fleet_file(3.4))
    before_rows = verdicts()
    before_versions = dict(AcceptancePolicy.objects.values_list("resource_class", "version"))

    out = io.StringIO()
    call_command("apply", "-f", str(candidate), "--what-if", "--json", stdout=out)
    predicted = json.loads(out.getvalue())
    # Nothing written.
    assert verdicts() == before_rows
    assert dict(AcceptancePolicy.objects.values_list("resource_class", "version")) == before_versions
    assert predicted == {
        "flips": [
            {
                "site": "lon-1",
                "resource_class": "gpu.x",
                "requirement": "hbm-bandwidth",
                "target": hostname,
                "target_kind": "device",
                "from": "passed",
                "to": "failed",
                "rules": [
                    {
                        "metric": "hbm_tbps",
                        "statistic": "min",
                        "value": value,
                        "comparator": "gte",
                        "threshold": 3.4,
                        "unit": "TB/s",
                        "text": f"hbm_tbps.min {value} TB/s is below ≥ 3.4 TB/s ({margin})",
                    }
                ],
            }
            for hostname, value, margin in (("n1", 3.1, "−8.8 %"), ("n2", 3.3, "−2.9 %"))
        ],
        "certificates_superseded": 2,
        "breakers": [],  # 2 of 4: within the breaker's floor of 3
        "autopilot": [],  # the file changes no site's autopilot
    }
    text = io.StringIO()
    call_command("apply", "-f", str(candidate), "--what-if", stdout=text)
    assert "lon-1 · gpu.x · hbm-bandwidth" in text.getvalue()
    assert "n1: passed → failed (hbm_tbps.min 3.1 TB/s is below ≥ 3.4 TB/s (−8.8 %))" in text.getvalue()

    # The real apply, the agent's re-evaluation and a sweep make exactly those flips.
    call_command("apply", "-f", str(candidate), stdout=io.StringIO())
    evaluate_now(*TestExecution.objects.all())
    sweep(Device.objects.first().satellite, "gpu.x")
    after_rows = verdicts()
    made = sorted(
        (key[0], key[1], before_rows[key], after_rows[key])
        for key in before_rows
        if before_rows[key] != after_rows[key]
    )
    assert made == [(f["requirement"], f["target"], f["from"], f["to"]) for f in predicted["flips"]]
    failed = AcceptanceCertificate.objects.filter(supersede_reason="failed").count()
    assert failed == predicted["certificates_superseded"]


@pytest.mark.django_db
def test_what_if_says_when_a_candidate_would_trip_the_circuit_breaker(fleet, tmp_path):
    burn_in(fleet)
    result = policy_what_if(document=parse_text(fleet_file(3.8)))  # every device fails
    assert result.breakers == [
        "4 of 4 gpu.x devices at lon-1 would newly fail: once they fail repair_after_failures times, the circuit "
        "breaker holds the moves to repair beyond 3 — suspect the thresholds before the hardware."
    ]
    text = io.StringIO()
    path = tmp_path / "candidate.yaml"
    path.write_text(fleet_file(3.8))
    call_command("apply", "-f", str(path), "--what-if", stdout=text)
    assert "circuit breaker: 4 of 4 gpu.x devices at lon-1 would newly fail" in " ".join(text.getvalue().split())


def _what_if_queries(fleet, n: int, slug: str) -> int:
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    site = fleet.site(slug)
    satellite = fleet.satellite(site, "sat-a")
    policy = fleet.policy(f"gpu.{slug}")
    hbm = fleet.requirement(
        policy, "hbm", test="nvbandwidth", thresholds=[{"metric": "hbm_tbps", "comparator": "gte", "threshold": 3.0}]
    )
    devices = [fleet.device(satellite, policy.resource_class) for _ in range(n)]
    evaluate_now(*(fleet.execution(hbm, device=d, metrics={"hbm_tbps": {"value": 3.2}}) for d in devices))
    sweep(satellite, policy.resource_class)
    document = parse_text(f"""
policies:
  - resource_class: gpu.{slug}
    requirements:
      - name: hbm
        gate: burn-in
        test: nvbandwidth
        thresholds: [{{metric: hbm_tbps, comparator: gte, threshold: 3.4}}]
""")
    with CaptureQueriesContext(connection) as queries:
        result = policy_what_if(document=document)
    assert len(result.flips) == n and result.certificates_superseded == n
    return len(queries)


@pytest.mark.django_db
def test_what_if_takes_the_same_queries_at_two_fleet_sizes(fleet):
    assert _what_if_queries(fleet, 3, "small") == _what_if_queries(fleet, 40, "large")


@pytest.mark.django_db
def test_what_if_reads_evidence_in_pages(fleet, monkeypatch):
    from fleet.fleetfile import whatif

    monkeypatch.setattr(whatif, "PAGE", 2)
    burn_in(fleet)
    result = policy_what_if(document=parse_text(fleet_file(3.4)))
    assert result.replayed == 4
    assert sorted(f.target for f in result.flips) == ["n1", "n2"] and result.certificates_superseded == 2
