"""The demo's NVL72 story round by round, without the demo's processes: under seed 42 the domain
nvl72-b01 fails its collective nvl72-nccl while every tray passes its own tests, and culprit
isolation (`fleet_rules.isolation`) over the simulated executor the demo's agents get names the
seed's fabric-faulty tray and no other (tests/e2e/test_demo_story.py plays the same through every
process, in minutes)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from fleet.demo.simulation import agent_environment, fabric_fault_members
from fleet.fleetfile.apply import fleet_apply
from fleet.fleetfile.document import parse_text
from fleet.inventory.models import Device, Topology
from fleet.policies.models import ParameterProfile, Requirement
from fleet.policies.selectors import load_resolutions
from fleet_agent.executors import SimulatedExecutor, Target, TestRun
from fleet_rules import isolation
from fleet_rules.autopilot import ISOLATE_AFTER_FAILURES
from fleet_rules.evaluator import evaluate
from fleet_rules.vocabulary import RequirementScope

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "fleet.yaml"
SEED = 42  # the demo's default
DOMAIN = "nvl72-b01"
#: The policies' repair_after_failures in the demo (`--max-attempts`).
REPAIR_AFTER = 3


@pytest.mark.django_db
def test_isolation_of_the_demo_s_nvl72_domain_names_the_seed_s_faulty_tray_alone(tmp_path):
    # given the example fleet as the demo applies it, and its agents' simulated executor
    fleet_apply(document=parse_text(EXAMPLE.read_text()))
    environment = agent_environment(seed=SEED, faulty_share=0.15, time_scale=0)
    repairs = tmp_path / "simulated-repairs.json"
    executor = SimulatedExecutor(
        seed=SEED,
        faulty_share=float(environment["FLEET_AGENT_FAULTY_SHARE"]),
        fabric_faults=frozenset(filter(None, environment["FLEET_AGENT_FABRIC_FAULTS"].split(","))),
        repairs_file=repairs,
    )
    domain = Topology.objects.get(label=DOMAIN)
    trays = {str(d.id): d for d in Device.objects.filter(memberships__topology=domain)}
    site_id = next(iter(trays.values())).site_id
    resource_class = next(iter(trays.values())).resource_class
    requirements = list(
        Requirement.objects.select_related("policy").filter(
            policy__resource_class=resource_class, retired_at__isnull=True
        )
    )
    rules = load_resolutions({(r.id, site_id) for r in requirements})
    profiles = {p.test: p.parameters for p in ParameterProfile.objects.filter(resource_class=resource_class)}

    def passes(requirement: Requirement, ids: tuple[str, ...], attempt: int) -> tuple[bool, str]:
        run = TestRun(
            requirement=requirement.name,
            test=requirement.test,
            parameters=dict(profiles.get(requirement.test, {})),
            targets=tuple(Target(i, trays[i].hostname, resource_class) for i in ids),
            topology_label=domain.label if len(ids) > 1 else None,
            topology_unit=domain.unit if len(ids) > 1 else None,
        )
        outcome = executor.run(run, attempt=attempt)
        result = evaluate(
            status=outcome.status,
            metrics=outcome.metrics,
            rules=rules[(requirement.id, site_id)].rules_list,
            error=outcome.error,
        )
        return result["passed"], result["reason"] or ""

    # A collective runs once every tray passes alone: a tray whose fault fails one of its own
    # requirements on every attempt has gone to repair and had its part swapped by then.
    single_node = [r for r in requirements if r.scope == RequirementScope.SINGLE_NODE and r.test != "health-window"]
    repaired = sorted(
        trays[i].hostname for i in trays if any(not passes(r, (i,), REPAIR_AFTER)[0] for r in single_node)
    )
    repairs.write_text(json.dumps(repaired))
    assert all(passes(r, (i,), REPAIR_AFTER + 1)[0] for r in single_node for i in trays)

    # when the domain's collective fails twice (the agent counts attempts per requirement and
    # topology), then isolation runs its rounds on the same executor
    collective = next(r for r in requirements if r.name == "nvl72-nccl")
    cohort = tuple(sorted(trays))
    attempts = iter(range(1, 1000))
    for _ in range(ISOLATE_AFTER_FAILURES):
        assert not passes(collective, cohort, next(attempts))[0]
    state = isolation.start(cohort)
    evidence = [f"repaired before the collective: {repaired}"]
    while not state.finished and state.rounds < isolation.max_rounds(len(cohort)):
        plan = isolation.next_round(state)
        outcomes = []
        for subset in plan.subsets:
            passed, reason = passes(collective, subset.devices, next(attempts))
            outcomes.append(passed)
            names = sorted(trays[i].hostname for i in subset.devices)
            evidence.append(f"round {state.rounds + 1}: {names} {'passed' if passed else 'failed: ' + reason}")
        state = isolation.apply_round(state, plan, outcomes)

    # then it names the seed's faulty tray and no other, within ⌈log2 18⌉ rounds
    seeded = fabric_fault_members(SEED, {DOMAIN: [d.hostname for d in trays.values()]})
    assert sorted(trays[i].hostname for i in state.culprits) == seeded, "\n".join(evidence)
    assert state.finished and not state.unresolved
    assert state.rounds <= math.ceil(math.log2(len(cohort)))
