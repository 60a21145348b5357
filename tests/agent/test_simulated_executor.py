"""The simulated fleet is predictable from its seed and judged by the example policies as a real one would be."""

from __future__ import annotations

import dataclasses
import itertools
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml

from fleet_agent.executors import Executor, Fault, SimulatedExecutor, Target, TestOutcome, TestRun
from fleet_agent.executors.simulated import FAULT_MODES, MULTINODE_TEST
from fleet_rules.evaluator import evaluate

FLEET_YAML = Path(__file__).resolve().parents[2] / "examples" / "fleet.yaml"
SITE = "lon-1"
H200, GB200 = "gpu.h200.8x", "gpu.gb200.nvl72"


@dataclass(frozen=True)
class Requirement:
    resource_class: str
    name: str
    test: str
    multi_node: bool
    rules: tuple[dict[str, Any], ...]
    parameters: dict[str, Any]


def _resolved(thresholds: list[dict[str, Any]], site: str) -> tuple[dict[str, Any], ...]:
    """The site's resolution: its overrides replace the default rule of the same metric and statistic."""
    slots: dict[tuple[str, str | None], dict[str, Any]] = {}
    for override in (False, True):
        for threshold in thresholds:
            if ("site" in threshold) is override and threshold.get("site", site) == site:
                slot = (threshold["metric"], threshold.get("statistic"))
                slots[slot] = {
                    "metric": threshold["metric"],
                    "statistic": threshold.get("statistic"),
                    "comparator": threshold["comparator"],
                    "threshold": threshold["threshold"],
                }
    return tuple(slots[slot] for slot in sorted(slots, key=lambda slot: (slot[0], slot[1] is not None, slot[1] or "")))


def _load_requirements() -> dict[str, list[Requirement]]:
    fleet = yaml.safe_load(FLEET_YAML.read_text())
    profiles = {(p["resource_class"], p["test"]): p["parameters"] for p in fleet["parameter_profiles"]}
    return {
        policy["resource_class"]: [
            Requirement(
                resource_class=policy["resource_class"],
                name=requirement["name"],
                test=requirement["test"],
                multi_node=requirement["scope"] == "multi_node",
                rules=_resolved(requirement["thresholds"], SITE),
                parameters=profiles.get((policy["resource_class"], requirement["test"]), {}),
            )
            for requirement in policy["requirements"]
        ]
        for policy in fleet["policies"]
    }


REQUIREMENTS = _load_requirements()
SINGLE_NODE = [(rc, req) for rc, reqs in REQUIREMENTS.items() for req in reqs if not req.multi_node]
MULTI_NODE = {rc: next(req for req in reqs if req.multi_node) for rc, reqs in REQUIREMENTS.items()}


def target(device_id: str, resource_class: str) -> Target:
    return Target(device_id=device_id, hostname=device_id, resource_class=resource_class)


def run_of(requirement: Requirement, *targets: Target, topology: str | None = None) -> TestRun:
    return TestRun(
        requirement=requirement.name,
        test=requirement.test,
        parameters=dict(requirement.parameters),
        targets=tuple(targets),
        topology_label=topology,
    )


def verdict(requirement: Requirement, outcome: TestOutcome) -> dict[str, Any]:
    return evaluate(status=outcome.status, metrics=outcome.metrics, rules=requirement.rules, error=outcome.error)


def device_ids(prefix: str = "dev") -> Iterator[str]:
    return (f"{prefix}-{number:05d}" for number in itertools.count())


def healthy_devices(executor: SimulatedExecutor, count: int) -> list[str]:
    return list(itertools.islice((d for d in device_ids() if executor.fault_of(d) is None), count))


def device_with(executor: SimulatedExecutor, mode: str) -> str:
    return next(d for d in device_ids() if (fault := executor.fault_of(d)) is not None and fault.mode == mode)


def test_the_example_thresholds_were_loaded_with_the_site_override() -> None:
    ib = next(req for req in REQUIREMENTS[H200] if req.test == "ib-write-bw")

    assert ib.rules == ({"metric": "bw_gbps", "statistic": "min", "comparator": "gte", "threshold": 350},)
    assert {req.test for req in REQUIREMENTS[GB200]} >= {"dcgm-diag", "nvbandwidth", MULTINODE_TEST}


def test_the_same_seed_gives_identical_outcomes_and_faults() -> None:
    first, second = SimulatedExecutor(seed=11, errored_share=0.1), SimulatedExecutor(seed=11, errored_share=0.1)
    devices = list(itertools.islice(device_ids(), 40))

    for (resource_class, requirement), device, attempt in itertools.product(SINGLE_NODE, devices[:8], (1, 2)):
        a = first.run(run_of(requirement, target(device, resource_class)), attempt=attempt)
        b = second.run(run_of(requirement, target(device, resource_class)), attempt=attempt)
        assert (a.status, a.metrics, a.error) == (b.status, b.metrics, b.error)
    assert [first.fault_of(d) for d in devices] == [second.fault_of(d) for d in devices]


def test_a_different_seed_picks_a_different_fault_set() -> None:
    devices = list(itertools.islice(device_ids(), 300))

    faulty = {seed: {d for d in devices if SimulatedExecutor(seed=seed).fault_of(d)} for seed in (1, 2)}

    assert faulty[1] and faulty[2]
    assert faulty[1] != faulty[2]


def test_values_differ_between_attempts_but_not_between_repeats_of_one_attempt() -> None:
    executor = SimulatedExecutor(seed=5)
    requirement = next(req for req in REQUIREMENTS[H200] if req.test == "hbm-bandwidth")
    run = run_of(requirement, target(healthy_devices(executor, 1)[0], H200))

    first, again, second = (executor.run(run, attempt=attempt) for attempt in (1, 1, 2))

    assert first.metrics == again.metrics
    assert first.metrics != second.metrics


@pytest.mark.parametrize("share", [0.05, 0.15, 0.5])
def test_the_faulty_share_is_roughly_honoured_over_2000_devices(share: float) -> None:
    executor = SimulatedExecutor(seed=3, faulty_share=share, transient_share=0.5)
    faults = [executor.fault_of(d) for d in itertools.islice(device_ids(), 2000)]
    present = [fault for fault in faults if fault is not None]

    assert abs(len(present) / 2000 - share) < 0.03
    assert abs(sum(not fault.permanent for fault in present) / len(present) - 0.5) < 0.15
    if share >= 0.15:
        assert {fault.mode for fault in present} == set(FAULT_MODES)


def test_a_fault_names_the_tests_it_fails() -> None:
    executor = SimulatedExecutor(seed=9, faulty_share=1.0)

    faults = [executor.fault_of(d) for d in itertools.islice(device_ids(), 200)]

    assert all(isinstance(fault, Fault) and fault.tests == FAULT_MODES[fault.mode] for fault in faults)
    assert FAULT_MODES["hca_degraded"] == {"ib-write-bw", MULTINODE_TEST}
    assert FAULT_MODES["nvlink_degraded"] == {"nvbandwidth", "nccl-all-reduce", MULTINODE_TEST}


@pytest.mark.parametrize("resource_class", [H200, GB200])
def test_every_fault_the_simulation_models_fails_a_requirement_of_its_class_alone(resource_class: str) -> None:
    """A fault that only a collective sees is found the long way (culprit isolation's rounds) or, when
    no collective of the class crosses its fabric (an HCA inside an NVLink domain), never: the example
    policies test every part the simulation can break on the device alone."""
    single_node_tests = {req.test for req in REQUIREMENTS[resource_class] if not req.multi_node}

    assert {mode for mode, tests in FAULT_MODES.items() if not tests & single_node_tests} == set()


@pytest.mark.parametrize("resource_class", [H200, GB200])
def test_healthy_devices_pass_every_requirement_of_their_resource_class(resource_class: str) -> None:
    executor = SimulatedExecutor(seed=21, slow_share=0.0)
    devices = healthy_devices(executor, 18)

    for requirement, device, attempt in itertools.product(REQUIREMENTS[resource_class], devices[:6], (1, 2, 3)):
        if requirement.multi_node:
            continue
        result = verdict(
            requirement, executor.run(run_of(requirement, target(device, resource_class)), attempt=attempt)
        )
        assert result["passed"], (requirement.name, device, attempt, result["reason"])
    cohort = [target(device, resource_class) for device in devices]
    for attempt in (1, 2):
        outcome = executor.run(run_of(MULTI_NODE[resource_class], *cohort, topology="rack-x01"), attempt=attempt)
        assert verdict(MULTI_NODE[resource_class], outcome)["passed"], outcome.metrics


CASES = [(rc, mode) for rc in (H200, GB200) for mode in FAULT_MODES]


@pytest.mark.parametrize(("resource_class", "mode"), CASES)
def test_a_permanent_fault_fails_exactly_its_tests_on_every_attempt(resource_class: str, mode: str) -> None:
    executor = SimulatedExecutor(seed=33, faulty_share=1.0, transient_share=0.0)
    device = device_with(executor, mode)
    fault = executor.fault_of(device)
    assert fault is not None and fault.permanent

    for (rc, requirement), attempt in itertools.product(SINGLE_NODE, (1, 2, 3)):
        if rc != resource_class:
            continue
        result = verdict(requirement, executor.run(run_of(requirement, target(device, rc)), attempt=attempt))
        assert result["passed"] is (requirement.test not in fault.tests), (requirement.name, attempt, result)


@pytest.mark.parametrize(("resource_class", "mode"), CASES)
def test_a_transient_fault_fails_its_tests_on_the_first_attempt_only(resource_class: str, mode: str) -> None:
    executor = SimulatedExecutor(seed=34, faulty_share=1.0, transient_share=1.0)
    device = device_with(executor, mode)
    fault = executor.fault_of(device)
    assert fault is not None and not fault.permanent

    for (rc, requirement), attempt in itertools.product(SINGLE_NODE, (1, 2, 3)):
        if rc != resource_class:
            continue
        result = verdict(requirement, executor.run(run_of(requirement, target(device, rc)), attempt=attempt))
        expected = attempt > 1 or requirement.test not in fault.tests
        assert result["passed"] is expected, (requirement.name, attempt, result)


@pytest.mark.parametrize(
    ("resource_class", "mode"), [(H200, "hca_degraded"), (H200, "nvlink_degraded"), (GB200, "nvlink_degraded")]
)
def test_a_cohort_with_one_network_faulty_member_fails_its_collective(resource_class: str, mode: str) -> None:
    executor = SimulatedExecutor(seed=41, faulty_share=0.2, transient_share=0.0)
    bad = device_with(executor, mode)
    requirement = MULTI_NODE[resource_class]
    cohort = [target(device, resource_class) for device in [*healthy_devices(executor, 3), bad]]

    failed = verdict(requirement, executor.run(run_of(requirement, *cohort, topology="t"), attempt=2))
    passed = verdict(requirement, executor.run(run_of(requirement, *cohort[:-1], topology="t"), attempt=2))

    assert failed["passed"] is False
    assert failed["reason"].startswith("busbw_gbps")
    assert passed["passed"] is True


@pytest.mark.parametrize(
    ("mode", "slows"),
    [
        ("hca_degraded", {"rack": True, "nvlink-domain": False}),
        ("nvlink_degraded", {"rack": True, "nvlink-domain": True}),
    ],
)
def test_a_collective_is_slowed_by_the_faults_of_the_fabric_it_crosses(mode: str, slows: dict[str, bool]) -> None:
    """A collective inside one NVLink domain runs over NVLink alone: a tray's degraded HCA (its
    InfiniBand scale-out NIC) cannot slow it, a degraded NVLink can; a rack's crosses both."""
    executor = SimulatedExecutor(seed=41, faulty_share=0.2, transient_share=0.0)
    requirement = MULTI_NODE[GB200]
    cohort = [target(device, GB200) for device in [*healthy_devices(executor, 3), device_with(executor, mode)]]

    for unit, slowed in slows.items():
        run = dataclasses.replace(run_of(requirement, *cohort, topology="t"), topology_unit=unit)
        for attempt in (1, 2):
            outcome = executor.run(run, attempt=attempt)
            assert verdict(requirement, outcome)["passed"] is not slowed, (unit, attempt, outcome.metrics["busbw_gbps"])


def test_a_non_network_fault_in_a_cohort_does_not_slow_the_collective() -> None:
    executor = SimulatedExecutor(seed=42, faulty_share=0.2, transient_share=0.0)
    cohort = [target(device, H200) for device in [*healthy_devices(executor, 3), device_with(executor, "hbm_degraded")]]

    outcome = executor.run(run_of(MULTI_NODE[H200], *cohort, topology="rack-a02"), attempt=1)

    assert verdict(MULTI_NODE[H200], outcome)["passed"] is True


def test_a_transient_network_fault_fails_the_first_cohort_attempt_only() -> None:
    executor = SimulatedExecutor(seed=43, faulty_share=0.3, transient_share=1.0)
    cohort = [target(device, H200) for device in [*healthy_devices(executor, 3), device_with(executor, "hca_degraded")]]
    requirement = MULTI_NODE[H200]

    results = [verdict(requirement, executor.run(run_of(requirement, *cohort), attempt=n))["passed"] for n in (1, 2, 3)]

    assert results == [False, True, True]


def test_a_fabric_fault_fails_every_collective_that_includes_the_device_and_nothing_else() -> None:
    executor = SimulatedExecutor(seed=44, faulty_share=0.0, fabric_faults=frozenset({"bad-host"}))
    requirement = MULTI_NODE[H200]
    cohort = [Target(f"dev-{i}", "bad-host" if i == 5 else f"host-{i}", H200) for i in range(8)]
    for attempt in (1, 2, 3):
        for members in (cohort, cohort[4:], cohort[4:6], [cohort[5], cohort[0]]):
            outcome = executor.run(run_of(requirement, *members, topology="rack"), attempt=attempt)
            assert verdict(requirement, outcome)["passed"] is False
        for members in (cohort[:4], cohort[6:], [cohort[4], cohort[0]]):
            outcome = executor.run(run_of(requirement, *members, topology="rack"), attempt=attempt)
            assert verdict(requirement, outcome)["passed"] is True
    for resource_class, single in SINGLE_NODE:
        if resource_class == H200:  # its single-node tests pass: only the fabric is at fault
            outcome = executor.run(run_of(single, cohort[5]), attempt=1)
            assert verdict(single, outcome)["passed"] is True, single.test


def test_errored_share_one_errors_every_run_and_the_evaluator_fails_each_with_its_error() -> None:
    executor = SimulatedExecutor(seed=50, errored_share=1.0)
    device = healthy_devices(executor, 1)[0]

    for resource_class, requirement in SINGLE_NODE:
        outcome = executor.run(run_of(requirement, target(device, resource_class)), attempt=1)
        assert outcome.status == "errored" and outcome.error
        assert outcome.metrics == {}
        assert verdict(requirement, outcome) == {"passed": False, "reason": outcome.error, "metric_evaluations": {}}


def test_an_errored_share_errors_about_that_fraction_of_runs() -> None:
    executor = SimulatedExecutor(seed=51, errored_share=0.2)
    requirement = next(req for req in REQUIREMENTS[H200] if req.test == "gpu-health")

    statuses = [
        executor.run(run_of(requirement, target(device, H200)), attempt=1).status
        for device in itertools.islice(device_ids(), 500)
    ]

    assert 0.14 < statuses.count("errored") / len(statuses) < 0.26


@pytest.mark.parametrize(
    ("run", "message"),
    [
        (
            TestRun("gpu-burn", "gpu-burn", {}, (target("d1", H200),)),
            "simulated executor has no model for test gpu-burn",
        ),
        (
            TestRun("gpu-diag", "dcgm-diag", {}, (target("d1", "gpu.mi325x.8x"),)),
            "no model for resource class gpu.mi325x.8x",
        ),
        (TestRun("gpu-diag", "dcgm-diag", {}, (target("d1", H200), target("d2", H200))), "runs on one device, got 2"),
        (TestRun("rack-nccl", MULTINODE_TEST, {}, ()), "was given no targets"),
        (
            TestRun("rack-nccl", MULTINODE_TEST, {}, (target("d1", H200), target("d2", GB200))),
            "mixing resource classes",
        ),
    ],
    ids=["unknown-test", "unknown-class", "cohort-for-single-node", "no-targets", "mixed-cohort"],
)
def test_a_run_the_simulation_cannot_model_is_an_errored_outcome(run: TestRun, message: str) -> None:
    outcome = SimulatedExecutor(seed=1).run(run, attempt=1)

    assert outcome.status == "errored"
    assert message in (outcome.error or "")


@pytest.mark.parametrize(
    ("test", "parameters", "seconds"),
    [
        ("dcgm-diag", {"level": 3}, 1800),
        ("dcgm-diag", {"level": 1}, 60),
        ("gpu-health", {}, 10),
        ("hbm-bandwidth", {"duration_s": 120}, 150),
        ("nvbandwidth", {}, 240),
        ("nccl-all-reduce", {}, 600),
        ("ib-write-bw", {"duration_s": 10}, 110),
    ],
)
def test_timestamps_are_when_the_run_started_and_ended_never_back_dated(
    test: str, parameters: dict, seconds: float
) -> None:
    """The nominal duration is simulated by sleeping (time_scale), never by back-dating the start:
    an execution reported as started before its job was created misleads an operator."""
    executor = SimulatedExecutor(seed=60, slow_share=0.0)
    run = TestRun("r", test, parameters, (target(healthy_devices(executor, 1)[0], H200),))
    assert executor.nominal_duration_s(run) == seconds

    before = datetime.now(UTC)
    outcome = executor.run(run, attempt=1)
    after = datetime.now(UTC)

    assert before <= outcome.started_at <= outcome.finished_at <= after
    assert outcome.started_at.tzinfo is UTC and outcome.finished_at.tzinfo is UTC


def test_a_slow_run_sleeps_five_times_its_nominal_duration() -> None:
    executor = SimulatedExecutor(seed=61, slow_share=1.0, time_scale=0.004)
    run = TestRun("gpu-health", "gpu-health", {}, (target("d1", H200),))

    began = time.monotonic()
    outcome = executor.run(run, attempt=1)
    elapsed = time.monotonic() - began

    assert elapsed >= 5 * executor.nominal_duration_s(run) * 0.004 * 0.95
    assert outcome.finished_at - outcome.started_at >= timedelta(seconds=elapsed * 0.5)


def test_time_scale_sleeps_the_scaled_duration_and_no_more() -> None:
    executor = SimulatedExecutor(seed=62, slow_share=0.0, time_scale=0.02)
    run = TestRun("gpu-health", "gpu-health", {}, (target(healthy_devices(executor, 1)[0], H200),))

    began = time.monotonic()
    outcome = executor.run(run, attempt=1)
    elapsed = time.monotonic() - began

    assert outcome.status == "completed"
    assert 0.19 <= elapsed < 1.0


def test_should_stop_interrupts_a_sleeping_run_promptly() -> None:
    executor = SimulatedExecutor(seed=63, slow_share=0.0, time_scale=1.0)
    run = TestRun("gpu-diag", "dcgm-diag", {"level": 3}, (target("d1", H200),))
    deadline = time.monotonic() + 0.15

    began = time.monotonic()
    outcome = executor.run(run, attempt=1, should_stop=lambda: time.monotonic() >= deadline)

    assert time.monotonic() - began < 1.0
    assert outcome.status == "errored"
    assert outcome.error is not None and "interrupted" in outcome.error
    assert timedelta(0) < outcome.finished_at - outcome.started_at < timedelta(seconds=5)


def test_per_gpu_metrics_carry_statistics_and_the_fleet_shape() -> None:
    executor = SimulatedExecutor(seed=64)
    device = healthy_devices(executor, 1)[0]

    def metrics(test: str, resource_class: str) -> dict[str, Any]:
        return executor.run(TestRun("r", test, {}, (target(device, resource_class),)), attempt=1).metrics

    assert metrics("gpu-health", H200)["gpu_count"] == {"value": 8}
    assert metrics("gpu-health", GB200)["gpu_count"] == {"value": 4}
    assert metrics("dcgm-diag", GB200)["diag_gpu_count"] == {"value": 4}
    assert set(metrics("hbm-bandwidth", H200)["hbm_bandwidth_tbps"]["statistics"]) == {"min", "max", "mean", "p50"}
    assert set(metrics("ib-write-bw", H200)["bw_gbps"]["statistics"]) == {"min", "max", "mean", "p50"}
    nvbandwidth = metrics("nvbandwidth", H200)
    assert set(nvbandwidth) == {"h2d_gbps", "d2h_gbps", "d2d_gbps"}
    assert round(nvbandwidth["d2d_gbps"]["statistics"]["sum"] / nvbandwidth["d2d_gbps"]["value"]) == 8 * 7


def test_workflows_advertise_single_and_multi_node_burn_in() -> None:
    assert SimulatedExecutor(seed=1).workflows() == [
        {"name": "SingleNodeBurnInWorkflow", "version": "1"},
        {"name": "MultiNodeBurnInCollectiveWorkflow", "version": "1"},
    ]


@pytest.mark.parametrize(
    "arguments",
    [{"faulty_share": 1.5}, {"transient_share": -0.1}, {"errored_share": 2}, {"slow_share": -1}, {"time_scale": -1}],
)
def test_out_of_range_settings_are_refused(arguments: dict[str, float]) -> None:
    with pytest.raises(ValueError):
        SimulatedExecutor(seed=1, **arguments)


def test_the_simulated_executor_is_an_executor() -> None:
    assert isinstance(SimulatedExecutor(seed=1), Executor)


def test_a_repaired_device_has_no_fault_from_its_next_run(tmp_path: Path) -> None:
    log = tmp_path / "simulated-repairs.json"
    executor = SimulatedExecutor(seed=3, faulty_share=1.0, transient_share=0.0, repairs_file=log)
    devices = [f"dev-{i}" for i in range(4)]
    assert all(executor.fault_of(d) is not None for d in devices)
    log.write_text('["dev-1", "dev-3"]')
    assert [executor.fault_of(d) is None for d in devices] == [False, True, False, True]
    log.write_text("[not json")  # half-written: repairs nothing yet
    assert all(executor.fault_of(d) is not None for d in devices)
