"""A simulated fleet: realistic burn-in metrics, a predictable share of faulty devices, no hardware.

It lets the whole system (agent, service, dashboard) be exercised end to end on a laptop and in CI. Every
choice is a pure function of the seed and stable names (the device's hostname, the rack's label), hashed
with SHA-256 (never `hash()`, which is salted per process), so two agents with the same seed, a test
predicting outcomes, or the same fleet applied again after a reset (new device ids, the same hostnames)
agree:

- whether a device is faulty (`faulty_share` of devices), whether its fault is permanent or transient
  (`transient_share` of faulty devices: the fault shows on attempt 1 only, as a reseated cable or a
  reset would fix), and which single fault mode it has (`FAULT_MODES`, each failing known tests);
- each run's values, drawn from `random.Random` seeded with (seed, hostname or cohort, test, attempt);
- which runs error out (`errored_share`) and which take five times their nominal duration (`slow_share`).

Healthy values sit comfortably inside the example acceptance thresholds (examples/fleet.yaml) and fault
values clearly outside them. A multi-node collective is degraded when any member has a fault active on that
attempt on a fabric it crosses, as one bad link slows a whole ring (`SCALE_OUT_MODES`); `fabric_faults` names
devices whose fabric fault fails every collective that includes them (culprit isolation's test case).

The simulated hardware can be repaired: `repairs_file` is the technician's log, a JSON list of the
hostnames (or device ids) whose faulty part was swapped; a repaired device has no fault, fabric fault
included. It is read
on every run, so a repair recorded while the agent runs takes effect on the device's next test.

Its hardware can be read (`hardware`, a `SimulatedHardware`: the inventory around every job and the
`health-window` test), with its own fault knobs: GPUs swapped (`swaps_file`) and health faults
(`health_faults`: a fatal Xid, ECC growth, a pending row remap, HW slowdown, an InfiniBand link that flaps or
corrupts symbols) that only the health window sees.
"""

from __future__ import annotations

import hashlib
import json
import random
import statistics as _stats
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fleet_agent.executors import base
from fleet_agent.executors.base import COMPLETED, WORKFLOWS, Target, TestOutcome, TestRun, errored, utc_now
from fleet_agent.executors.hardware import HEALTH_WINDOW_TEST, health_window
from fleet_agent.executors.simulated_amd import (
    AMD_CLASSES,
    AMD_CRASH_TEXTS,
    AMD_FAULT_MODES,
    AMD_MULTINODE_TEST,
    AMD_TESTS,
    run_amd_test,
)
from fleet_agent.executors.simulated_hardware import HealthFault, SimulatedHardware
from fleet_agent.parsers.nvbandwidth import metric_for_testcase
from fleet_rules.vocabulary import TopologyUnit

__all__ = ["FAULT_MODES", "MODELLED_TESTS", "RESOURCE_CLASSES", "SCALE_OUT_MODES", "Fault", "SimulatedExecutor"]

MULTINODE_TEST = "nccl-all-reduce-multinode"
#: The collectives across a topology, of either vendor.
MULTINODE_TESTS = frozenset({MULTINODE_TEST, AMD_MULTINODE_TEST})

FAULT_MODES: Mapping[str, frozenset[str]] = {
    "hbm_degraded": frozenset({"hbm-bandwidth"}),
    "row_remap_pending": frozenset({"gpu-health"}),
    "sram_uncorrectable": frozenset({"gpu-health"}),
    "dcgm_diag_failure": frozenset({"dcgm-diag"}),
    "nvlink_degraded": frozenset({"nvbandwidth", "nccl-all-reduce", MULTINODE_TEST}),
    "hca_degraded": frozenset({"ib-write-bw", MULTINODE_TEST}),
}
_MODE_ORDER = tuple(FAULT_MODES)
#: Faults off an NVLink domain's fabric: a collective inside one (`topology_unit`) runs over NVLink alone, so a
#: degraded HCA (the InfiniBand scale-out NIC) cannot slow it; a rack's crosses InfiniBand between its nodes.
SCALE_OUT_MODES = frozenset({"hca_degraded"})
_AMD_MODE_ORDER = tuple(AMD_FAULT_MODES)

MODELLED_TESTS: tuple[str, ...] = (
    "dcgm-diag",
    "gpu-health",
    "hbm-bandwidth",
    "nvbandwidth",
    "nccl-all-reduce",
    "ib-write-bw",
    MULTINODE_TEST,
    HEALTH_WINDOW_TEST,
    *AMD_TESTS,
)

_DEFAULT_TESTCASES = ("host_to_device_memcpy_ce", "device_to_host_memcpy_ce", "device_to_device_memcpy_write_ce")
_DCGM_LEVEL_SECONDS = {1: 60.0, 2: 180.0, 3: 1800.0, 4: 5400.0}
_DCGM_TESTS = {
    1: ("software",),
    2: ("software", "pcie", "memory"),
    3: ("software", "pcie", "memory", "diagnostic", "targeted_stress", "targeted_power", "memory_bandwidth"),
    4: (
        "software",
        "pcie",
        "memory",
        "diagnostic",
        "targeted_stress",
        "targeted_power",
        "memory_bandwidth",
        "pulse_test",
    ),
}
_STOP_POLL_S = 0.05
_SLOW_FACTOR = 5.0


@dataclass(frozen=True)
class Hardware:
    """Healthy figures of one resource class: counts, and (mean, standard deviation) of each measurement."""

    gpus: int
    hcas: int
    hbm_tbps: tuple[float, float]
    h2d_gbps: tuple[float, float]
    d2h_gbps: tuple[float, float]
    d2d_gbps: tuple[float, float]
    nccl_busbw_gbps: tuple[float, float]
    ib_gbps: tuple[float, float]
    multinode_busbw_gbps: tuple[float, float]
    idle_temp_c: tuple[float, float]


RESOURCE_CLASSES: Mapping[str, Hardware] = {
    # 8x H200 SXM (HBM3e ~4.8 TB/s peak, ~4.0 TB/s achieved), PCIe Gen5 hosts, NVLink 4, 8x 400G NDR.
    "gpu.h200.8x": Hardware(
        gpus=8,
        hcas=8,
        hbm_tbps=(4.05, 0.03),
        h2d_gbps=(55.3, 0.15),
        d2h_gbps=(55.2, 0.15),
        d2d_gbps=(396.5, 1.2),
        nccl_busbw_gbps=(478.0, 2.5),
        ib_gbps=(392.0, 1.0),
        multinode_busbw_gbps=(372.0, 3.0),
        idle_temp_c=(34.0, 2.5),
    ),
    # GB200 NVL72 compute tray: 2x Grace + 4x B200 (HBM3e ~8 TB/s peak), NVLink-C2C hosts, NVLink 5.
    "gpu.gb200.nvl72": Hardware(
        gpus=4,
        hcas=4,
        hbm_tbps=(7.25, 0.05),
        h2d_gbps=(372.0, 2.5),
        d2h_gbps=(368.0, 2.5),
        d2d_gbps=(774.5, 1.5),
        nccl_busbw_gbps=(712.0, 3.0),
        ib_gbps=(392.0, 1.0),
        multinode_busbw_gbps=(815.0, 4.0),
        idle_temp_c=(31.0, 2.5),
    ),
}


#: The technician's log of the simulated hardware, in the agent's state directory.
SIMULATED_REPAIRS = "simulated-repairs.json"


@dataclass(frozen=True)
class Fault:
    """The one fault a simulated device has; `component` picks the GPU or HCA it sits on."""

    device: str  # its hostname (the stable name faults are keyed on)
    mode: str
    permanent: bool
    tests: frozenset[str]
    component: int

    def active(self, attempt: int) -> bool:
        """Whether the fault shows on this attempt: always if permanent, else only on the first."""
        return self.permanent or attempt <= 1


class SimulatedExecutor:
    """An `Executor` over a simulated fleet (see the module docstring)."""

    name = "simulated"

    def __init__(
        self,
        seed: int,
        faulty_share: float = 0.15,
        transient_share: float = 0.5,
        errored_share: float = 0.0,
        slow_share: float = 0.05,
        time_scale: float = 0.0,
        fabric_faults: frozenset[str] = frozenset(),
        repairs_file: Path | None = None,
        health_faults: Mapping[str, tuple[HealthFault, ...]] | None = None,
        swaps_file: Path | None = None,
    ) -> None:
        for label, share in (
            ("faulty_share", faulty_share),
            ("transient_share", transient_share),
            ("errored_share", errored_share),
            ("slow_share", slow_share),
        ):
            if not 0.0 <= share <= 1.0:
                raise ValueError(f"{label} must be between 0 and 1, got {share}")
        if time_scale < 0:
            raise ValueError(f"time_scale must not be negative, got {time_scale}")
        self.seed = seed
        self.faulty_share = faulty_share
        self.transient_share = transient_share
        self.errored_share = errored_share
        self.slow_share = slow_share
        self.time_scale = time_scale
        #: Devices (hostname or id) with a permanent fabric fault: every collective that includes
        #: them is degraded, on every attempt, whatever the seed; their single-node tests pass.
        self.fabric_faults = frozenset(fabric_faults)
        self.repairs_file = repairs_file
        self.hardware = SimulatedHardware(health_faults, swaps_file)
        #: The vendor of each simulated resource class's GPUs (what the agent reads them with when its
        #: configuration does not say).
        self.gpu_vendors = dict.fromkeys(RESOURCE_CLASSES, "nvidia") | dict.fromkeys(AMD_CLASSES, "amd")

    def workflows(self) -> list[dict[str, str]]:
        """Both burn-in workflows: the simulation models single-node tests and collectives."""
        return [dict(workflow) for workflow in WORKFLOWS]

    def fault_of(self, device: str | Target) -> Fault | None:
        """The device's fault under this seed, or None for a healthy (or repaired) device. Keyed on
        its hostname, never its id: ids are new each time a fleet is applied to an empty database,
        and the same seed must play the same fleet after a reset. An AMD device (a `Target` of an AMD
        class) has one of the AMD modes; a hostname alone is read as an NVIDIA device's."""
        name = device.hostname if isinstance(device, Target) else device
        if self._unit("faulty", name) >= self.faulty_share or self._is_repaired(device):
            return None
        amd = isinstance(device, Target) and device.resource_class in AMD_CLASSES
        modes, order = (AMD_FAULT_MODES, _AMD_MODE_ORDER) if amd else (FAULT_MODES, _MODE_ORDER)
        mode = order[int(self._unit("mode", name) * len(order))]
        return Fault(
            device=name,
            mode=mode,
            permanent=self._unit("transient", name) >= self.transient_share,
            tests=modes[mode],
            component=int(self._unit("component", name) * 8),
        )

    def _is_repaired(self, device: str | Target) -> bool:
        repaired = self.repaired()
        if isinstance(device, Target):
            return device.hostname in repaired or device.device_id in repaired
        return device in repaired

    def fabric_fault_of(self, target: Target) -> bool:
        """Whether this device's permanent fabric fault (`fabric_faults`) degrades its collectives
        (until the technician repairs it)."""
        named = target.device_id in self.fabric_faults or target.hostname in self.fabric_faults
        return named and not self._is_repaired(target)

    def repaired(self) -> frozenset[str]:
        """The devices whose faulty part the technician swapped (`repairs_file`); none when the file
        is absent or unreadable (a half-written log repairs nothing yet)."""
        if self.repairs_file is None:
            return frozenset()
        try:
            listed = json.loads(self.repairs_file.read_text())
        except (OSError, ValueError):
            return frozenset()
        return frozenset(str(d) for d in listed) if isinstance(listed, list) else frozenset()

    def nominal_duration_s(self, run: TestRun) -> float:
        """How long the real test would take, before any slow-down; unknown tests take no time."""
        parameters = run.parameters
        hardware = RESOURCE_CLASSES.get(run.targets[0].resource_class) if run.targets else None
        match run.test:
            case "dcgm-diag":
                return _DCGM_LEVEL_SECONDS.get(_int(parameters.get("level"), 3), 1800.0)
            case "gpu-health":
                return 10.0
            case "hbm-bandwidth":
                return float(_int(parameters.get("duration_s"), 120)) + 30.0
            case "nvbandwidth":
                return 240.0
            case "nccl-all-reduce":
                return 600.0
            case "ib-write-bw":
                return float(_int(parameters.get("duration_s"), 10)) * (hardware.hcas if hardware else 8) + 30.0
            case "nccl-all-reduce-multinode" | "rccl-all-reduce-multinode":
                return 900.0
            case "rvs-stress":
                return float(_int(parameters.get("duration_s"), 600)) + 60.0
            case "transferbench-a2a" | "rccl-all-reduce":
                return 300.0
        return 0.0

    def remedy(self, run: base.RemedyRun, *, should_stop: Callable[[], bool] = lambda: False) -> base.RemedyResult:
        """A step of the remediation ladder: the simulated node's transient faults are cured (its others stay)."""
        return self.hardware.remedy(run)

    def run(self, run: TestRun, *, attempt: int, should_stop: Callable[[], bool] = lambda: False) -> TestOutcome:
        """Simulate one run; faults, values, errors and slowness follow from the seed (see module docstring)."""
        if attempt < 1:
            raise ValueError(f"attempt numbers start at 1, got {attempt}")
        started_at = utc_now()
        problem = self._unrunnable(run)
        if problem is not None:
            return errored(problem, started_at, started_at)
        key = self._run_key(run)
        if run.test == HEALTH_WINDOW_TEST:
            # Reading counters and a log takes no time worth simulating; it can still fail like any tool.
            if self._unit("errored", key, run.test, str(attempt)) < self.errored_share:
                return errored(_crash_text(run), started_at)
            return health_window(self.hardware, run)
        duration = self.nominal_duration_s(run)
        if self._unit("slow", key, run.test, str(attempt)) < self.slow_share:
            duration *= _SLOW_FACTOR
        fails = self._unit("errored", key, run.test, str(attempt)) < self.errored_share
        if fails:
            duration *= 0.25 + 0.5 * self._unit("errored-after", key, run.test, str(attempt))

        interrupted = self._wait(duration, should_stop)
        # The times are when the run started and ended on this clock, never the simulated span
        # back-dated: an execution that seemed to start before its job existed would tell an
        # operator the clocks are wrong. Compressed time shows as a short run.
        finished_at = utc_now()
        if interrupted:
            return errored("interrupted: the agent is stopping", started_at, finished_at)
        if fails:
            return errored(_crash_text(run), started_at, finished_at)
        rng = random.Random(self._seed_int(key, run.test, str(attempt)))
        metrics = self._metrics(run, attempt, rng)
        return TestOutcome(
            status=COMPLETED, metrics=metrics, error=None, started_at=started_at, finished_at=finished_at
        )

    def _unrunnable(self, run: TestRun) -> str | None:
        if run.test not in MODELLED_TESTS:
            return f"simulated executor has no model for test {run.test}"
        if not run.targets:
            return f"test {run.test} was given no targets"
        classes = {target.resource_class for target in run.targets}
        if len(classes) > 1:
            return f"test {run.test} was given a cohort mixing resource classes {', '.join(sorted(classes))}"
        (resource_class,) = classes
        if resource_class not in RESOURCE_CLASSES and resource_class not in AMD_CLASSES:
            return f"simulated executor has no model for resource class {resource_class}"
        if (run.test in AMD_TESTS) != (resource_class in AMD_CLASSES) and run.test != HEALTH_WINDOW_TEST:
            vendor = "AMD" if resource_class in AMD_CLASSES else "NVIDIA"
            return f"test {run.test} needs another vendor's tools: {resource_class} has {vendor} GPUs"
        if run.test not in MULTINODE_TESTS and len(run.targets) != 1:
            return f"test {run.test} runs on one device, got {len(run.targets)}"
        return None

    def _wait(self, duration: float, should_stop: Callable[[], bool]) -> bool:
        """Sleep `duration * time_scale` in small steps; whether it was stopped."""
        if should_stop():
            return True
        real_total = duration * self.time_scale
        start = time.monotonic()
        while (elapsed := time.monotonic() - start) < real_total:
            if should_stop():
                return True
            time.sleep(min(_STOP_POLL_S, real_total - elapsed))
        return False

    def _metrics(self, run: TestRun, attempt: int, rng: random.Random) -> dict[str, Any]:
        if run.test in AMD_TESTS:
            return self._amd_metrics(run, attempt, rng)
        hardware = RESOURCE_CLASSES[run.targets[0].resource_class]
        if run.test == MULTINODE_TEST:
            degraded = {
                target.device_id
                for target in run.targets
                if (
                    (fault := self.fault_of(target)) is not None
                    and MULTINODE_TEST in fault.tests
                    and fault.active(attempt)
                    and not (run.topology_unit == TopologyUnit.NVLINK_DOMAIN and fault.mode in SCALE_OUT_MODES)
                )
                or self.fabric_fault_of(target)
            }
            return _multinode(hardware, run.targets, degraded, rng)
        fault = self.fault_of(run.targets[0])
        active = fault if fault is not None and run.test in fault.tests and fault.active(attempt) else None
        model = _SINGLE_NODE_MODELS[run.test]
        return model(hardware, run.parameters, active, rng)

    def _amd_metrics(self, run: TestRun, attempt: int, rng: random.Random) -> dict[str, Any]:
        """An AMD test's output rendered as its tool prints it and read by the real parser (`simulated_amd`)."""
        hardware = AMD_CLASSES[run.targets[0].resource_class]

        def active(target: Target) -> Fault | None:
            fault = self.fault_of(target)
            return fault if fault is not None and run.test in fault.tests and fault.active(attempt) else None

        degraded = [active(target) is not None or self.fabric_fault_of(target) for target in run.targets]
        fault = active(run.targets[0])
        faulty_gpu = fault.component % hardware.gpus if fault is not None else None
        return run_amd_test(run.test, hardware, run.parameters, faulty_gpu=faulty_gpu, degraded=degraded, rng=rng)

    def _run_key(self, run: TestRun) -> str:
        if run.test in MULTINODE_TESTS:
            members = ",".join(sorted(target.hostname for target in run.targets))
            return f"cohort:{run.topology_label or ''}:{members}"
        return f"device:{run.targets[0].hostname}"

    def _digest(self, *parts: str) -> bytes:
        return hashlib.sha256("\x1f".join((str(self.seed), *parts)).encode("utf-8")).digest()

    def _unit(self, *parts: str) -> float:
        """A uniform number in [0, 1) fixed by the seed and `parts`."""
        return int.from_bytes(self._digest(*parts)[:8], "big") / 2**64

    def _seed_int(self, *parts: str) -> int:
        return int.from_bytes(self._digest("values", *parts), "big")


def _int(raw: Any, default: int) -> int:
    try:
        return int(raw)
    except (TypeError, ValueError):
        return default


def _normal(rng: random.Random, figure: tuple[float, float], floor_sigmas: float = 3.0) -> float:
    """A normal draw clipped to mean ± `floor_sigmas` deviations, so healthy values stay healthy."""
    mean, sigma = figure
    return min(mean + floor_sigmas * sigma, max(mean - floor_sigmas * sigma, rng.gauss(mean, sigma)))


def _per_component(values: Sequence[float], digits: int, *, value: str, median: bool = True) -> dict[str, Any]:
    """A metric over GPUs or HCAs: statistics min/max/mean(/p50), value = the named statistic."""
    rounded = [round(number, digits) for number in values]
    statistics: dict[str, float] = {
        "min": min(rounded),
        "max": max(rounded),
        "mean": round(_stats.fmean(rounded), digits),
    }
    if median:
        statistics["p50"] = round(_stats.median(rounded), digits)
    return {"value": statistics[value], "statistics": statistics}


def _dcgm_diag(
    hardware: Hardware, parameters: Mapping[str, Any], fault: Fault | None, rng: random.Random
) -> dict[str, Any]:
    tests = _DCGM_TESTS.get(_int(parameters.get("level"), 3), _DCGM_TESTS[3])
    warned = 1 if rng.random() < 0.04 else 0
    return {
        "diag_failed_tests": {"value": 1 if fault is not None else 0},
        "diag_warned_tests": {"value": warned},
        "diag_gpu_count": {"value": hardware.gpus},
        "diag_tests_run": {"value": len(tests)},
    }


def _gpu_health(
    hardware: Hardware, parameters: Mapping[str, Any], fault: Fault | None, rng: random.Random
) -> dict[str, Any]:
    remaps = [0] * hardware.gpus
    sram = [0] * hardware.gpus
    if fault is not None:
        gpu = fault.component % hardware.gpus
        if fault.mode == "row_remap_pending":
            remaps[gpu] = rng.randint(1, 4)
        elif fault.mode == "sram_uncorrectable":
            sram[gpu] = rng.randint(1, 3)
    temps = [_normal(rng, hardware.idle_temp_c) for _ in range(hardware.gpus)]
    return {
        "gpu_count": {"value": hardware.gpus},
        "ecc_pending_row_remaps": _per_component(remaps, 0, value="max", median=False),
        "sram_uncorrectable_errors": _per_component(sram, 0, value="max", median=False),
        "gpu_temp_c": {"unit": "C", **_per_component([round(t) for t in temps], 1, value="max", median=False)},
    }


def _hbm_bandwidth(
    hardware: Hardware, parameters: Mapping[str, Any], fault: Fault | None, rng: random.Random
) -> dict[str, Any]:
    values = [_normal(rng, hardware.hbm_tbps) for _ in range(hardware.gpus)]
    if fault is not None:
        gpu = fault.component % hardware.gpus
        values[gpu] = hardware.hbm_tbps[0] * rng.uniform(0.66, 0.76)
    return {"hbm_bandwidth_tbps": {"unit": "TB/s", **_per_component(values, 3, value="mean")}}


def _nvbandwidth(
    hardware: Hardware, parameters: Mapping[str, Any], fault: Fault | None, rng: random.Random
) -> dict[str, Any]:
    testcases = parameters.get("testcases")
    if not isinstance(testcases, list | tuple) or not testcases:
        testcases = _DEFAULT_TESTCASES
    gpus = hardware.gpus
    slow_gpu = fault.component % gpus if fault is not None else None
    cells: dict[str, list[float]] = {}
    for testcase in testcases:
        metric = metric_for_testcase(str(testcase))
        if metric == "h2d_gbps":
            cells.setdefault(metric, []).extend(_normal(rng, hardware.h2d_gbps) for _ in range(gpus))
        elif metric == "d2h_gbps":
            cells.setdefault(metric, []).extend(_normal(rng, hardware.d2h_gbps) for _ in range(gpus))
        elif metric == "d2d_gbps":
            for row in range(gpus):
                for column in range(gpus):
                    if row == column:
                        continue
                    value = _normal(rng, hardware.d2d_gbps)
                    if slow_gpu in (row, column):
                        value *= rng.uniform(0.40, 0.55)
                    cells.setdefault(metric, []).append(value)
    metrics: dict[str, Any] = {}
    for metric, values in sorted(cells.items()):
        rounded = [round(value, 2) for value in values]
        statistics = {
            "min": min(rounded),
            "max": max(rounded),
            "mean": round(_stats.fmean(rounded), 2),
            "sum": round(sum(rounded), 2),
        }
        metrics[metric] = {"value": statistics["mean"], "unit": "GB/s", "statistics": statistics}
    return metrics


def _nccl_all_reduce(
    hardware: Hardware, parameters: Mapping[str, Any], fault: Fault | None, rng: random.Random
) -> dict[str, Any]:
    peak = _normal(rng, hardware.nccl_busbw_gbps)
    if fault is not None:
        peak *= rng.uniform(0.55, 0.70)
    return _collective(peak, rng)


def _ib_write_bw(
    hardware: Hardware, parameters: Mapping[str, Any], fault: Fault | None, rng: random.Random
) -> dict[str, Any]:
    values = [_normal(rng, hardware.ib_gbps) for _ in range(hardware.hcas)]
    if fault is not None:
        values[fault.component % hardware.hcas] = hardware.ib_gbps[0] * rng.uniform(0.45, 0.55)
    return {"bw_gbps": {"unit": "Gb/s", **_per_component(values, 2, value="mean")}}


def _multinode(hardware: Hardware, targets: Sequence[Target], degraded: set[str], rng: random.Random) -> dict[str, Any]:
    """Cohort bus bandwidth: statistics over the members' own figures; the slowest member gates the value."""
    base = _normal(rng, hardware.multinode_busbw_gbps)
    members = []
    for target in sorted(targets, key=lambda target: target.hostname):
        member = base * rng.uniform(0.99, 1.01)
        if degraded:
            member *= rng.uniform(0.68, 0.74) if target.device_id in degraded else rng.uniform(0.74, 0.76)
        members.append(member)
    statistics = _per_component(members, 2, value="min")
    metrics = _collective(statistics["value"], rng)
    metrics["busbw_gbps"]["statistics"] = statistics["statistics"]
    return metrics


def _collective(out_of_place: float, rng: random.Random) -> dict[str, Any]:
    """all_reduce_perf-style metrics for a run whose out-of-place bus bandwidth at the largest size is given."""
    in_place = out_of_place * rng.uniform(0.995, 1.004)
    pair = [round(out_of_place, 2), round(in_place, 2)]
    return {
        "busbw_gbps": {
            "value": pair[0],
            "unit": "GB/s",
            "statistics": {"min": min(pair), "max": max(pair), "mean": round(_stats.fmean(pair), 2)},
        },
        "avg_busbw_gbps": {"value": round(out_of_place * rng.uniform(0.38, 0.42), 2), "unit": "GB/s"},
        "wrong": {"value": 0},
    }


_SingleNodeModel = Callable[[Hardware, Mapping[str, Any], Fault | None, random.Random], dict[str, Any]]

_SINGLE_NODE_MODELS: Mapping[str, _SingleNodeModel] = {
    "dcgm-diag": _dcgm_diag,
    "gpu-health": _gpu_health,
    "hbm-bandwidth": _hbm_bandwidth,
    "nvbandwidth": _nvbandwidth,
    "nccl-all-reduce": _nccl_all_reduce,
    "ib-write-bw": _ib_write_bw,
}


def _crash_text(run: TestRun) -> str:
    """What the real tool prints when it dies, so that errored runs look like the ones operators see."""
    host = run.targets[0].hostname
    texts = {
        "dcgm-diag": "dcgmi diag exited with status 226: Error: Diagnostic could not complete: "
        "the DCGM host engine stopped responding (DCGM_ST_CONNECTION_NOT_VALID)",
        "gpu-health": f"nvidia-smi exited with status 15 on {host}: Unable to determine the device handle for "
        "GPU 00000000:3A:00.0: Unknown Error",
        "hbm-bandwidth": f"hbm stream exited with status 1 on {host}: CUDA error: an illegal memory access was "
        "encountered (cudaErrorIllegalAddress)",
        "nvbandwidth": f"nvbandwidth exited with status 1 on {host}: [CUDA_ERROR_LAUNCH_FAILED] in expression "
        "cuStreamSynchronize(stream)",
        "nccl-all-reduce": f"all_reduce_perf exited with status 3: {host}: Test NCCL failure common.cu:1005 "
        "'unhandled cuda error (run with NCCL_DEBUG=INFO for details)'",
        "ib-write-bw": f"ib_write_bw exited with status 1 on {host}: Couldn't connect to peer: "
        "Unable to init the socket connection",
        MULTINODE_TEST: f"mpirun exited with status 137: process rank 11 on node {host} exited on signal 9 "
        "(Killed); NCCL watchdog timeout",
        HEALTH_WINDOW_TEST: f"the kernel log could not be read: journalctl exited with status 1 on {host}: "
        "Failed to get journal fields: Bad message",
        **{test: text.format(host=host) for test, text in AMD_CRASH_TEXTS.items()},
    }
    return texts[run.test]
