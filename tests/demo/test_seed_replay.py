"""Issue 43, item 6: `fleet demo --seed 42` plays the same fleet after `make reset`. A reset drops
the database, so applying the example fleet again gives every device a new id; the simulated faults
are keyed on hostnames, so the same devices fail the same requirements."""

from __future__ import annotations

from pathlib import Path

import pytest
from django.core.management import call_command

from fleet.demo.simulation import agent_environment
from fleet.fleetfile.apply import fleet_apply
from fleet.fleetfile.document import parse_text
from fleet.inventory.models import Device, Topology
from fleet.policies.models import ParameterProfile, Requirement
from fleet.policies.selectors import load_resolutions
from fleet_agent.executors import SimulatedExecutor, Target, TestRun
from fleet_rules.eligibility import is_enrolled
from fleet_rules.evaluator import evaluate
from fleet_rules.vocabulary import RequirementScope

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "fleet.yaml"
SEED = 42


def _failing_after_applying() -> tuple[set[tuple[str, str, int]], dict[str, str]]:
    """Apply the example fleet as the demo does, then run every target three times on the simulated
    executor the demo's agents get (same seed, same settings), judged by the agent's evaluator:
    the (target, requirement, attempt) that fail, and each device's id."""
    fleet_apply(document=parse_text(EXAMPLE.read_text()))
    settings = agent_environment(seed=SEED, faulty_share=0.15, time_scale=0)
    executor = SimulatedExecutor(
        seed=SEED,
        faulty_share=float(settings["FLEET_AGENT_FAULTY_SHARE"]),
        fabric_faults=frozenset(filter(None, settings["FLEET_AGENT_FABRIC_FAULTS"].split(","))),
    )
    devices = [
        d for d in Device.objects.select_related("site") if is_enrolled(enrolled_at=d.enrolled_at, state=d.state)
    ]
    requirements = list(Requirement.objects.select_related("policy").filter(retired_at__isnull=True))
    rules = load_resolutions({(r.id, devices[0].site_id) for r in requirements})
    profiles = {(p.resource_class, p.test): p.parameters for p in ParameterProfile.objects.all()}
    failing = set()

    def judge(requirement: Requirement, targets: list[Target], name: str, topology: str | None = None) -> None:
        run = TestRun(
            requirement=requirement.name,
            test=requirement.test,
            parameters=dict(profiles.get((requirement.policy.resource_class, requirement.test), {})),
            targets=tuple(targets),
            topology_label=topology,
        )
        for attempt in (1, 2, 3):
            outcome = executor.run(run, attempt=attempt)
            verdict = evaluate(
                status=outcome.status,
                metrics=outcome.metrics,
                rules=rules[(requirement.id, devices[0].site_id)].rules_list,
                error=outcome.error,
            )
            if not verdict["passed"]:
                failing.add((name, requirement.name, attempt))

    for requirement in requirements:
        members = [d for d in devices if d.resource_class == requirement.policy.resource_class]
        if requirement.scope == RequirementScope.SINGLE_NODE:
            for device in members:
                if requirement.test != "health-window":  # read from the hardware, not the seed
                    judge(
                        requirement, [Target(str(device.id), device.hostname, device.resource_class)], device.hostname
                    )
            continue
        for topology in Topology.objects.filter(unit=requirement.unit).prefetch_related("memberships__device"):
            cohort = [m.device for m in topology.memberships.all() if m.device in members]
            if len(cohort) > 1:
                targets = [Target(str(d.id), d.hostname, d.resource_class) for d in cohort]
                judge(requirement, targets, topology.label, topology.label)
    return failing, {d.hostname: str(d.id) for d in devices}


@pytest.mark.django_db(transaction=True)
def test_the_same_seed_fails_the_same_devices_after_a_reset():
    before, ids_before = _failing_after_applying()
    call_command("flush", interactive=False, verbosity=0)  # what `make reset` does to the demo's data

    after, ids_after = _failing_after_applying()

    assert set(ids_before) == set(ids_after)
    assert not set(ids_before.values()) & set(ids_after.values()), "a reset gives every device a new id"
    assert before, "seed 42 plays a fleet with failures"
    assert {name for name, _, _ in before} & {"nvl72-b01"}, "and an NVLink domain whose collective fails"
    assert after == before
