"""What the agent reads about a device's hardware around each job: its inventory (the fingerprint a certificate
binds) and the health evidence of the job's window (Xid/SXid events, ECC and row-remap counters before and
after, throttle reasons seen).

An executor that can read hardware has a `hardware` attribute, a `HardwareSource`: the command executor runs
the configured `hardware_commands` on the device, the simulated executor renders what those tools would print
for its simulated fleet. Both feed the same parsers here, so an inventory or a health window has one shape
whatever produced it.

* `collect_inventory` reads the GPU inventory (its vendor's tool: `nvidia-smi -q -x`, `amd-smi static --json`;
  `fleet_agent.gpus`), `ibstat` and the DMI table once per job; a part that cannot be read is named in `missing`
  with the reason, and its fields stay null — nothing is invented.
* `health_snapshot` reads the GPU health (ECC, row remaps, throttling: `nvidia-smi -q -x`, `amd-smi metric
  --json`) at the start of a job.
* `fabric_snapshot` reads the InfiniBand ports' error counters (`ib_counters`: sysfs or `perfquery`) at the start
  of a job, when the source has a reading for them.
* `job_start` is what the runner reads at the start of a single-device job: the inventory and the snapshots a
  health window starts from (`JobHardware`).
* `health_window` is the `health-window` test, which the runner runs last in a job: it reads the kernel log for
  the job's window (the vendor's events: Xid/SXid, amdgpu RAS), the snapshots after, and judges nothing itself — it
  returns the metrics the requirement's thresholds judge (`xid_fatal_count` or `amdgpu_ras_fatal_count`,
  `row_remap_pending`, `ecc_uncorrected_delta`, `hw_slowdown_seen`, `ib_link_downed_delta`, `ib_link_flaps`, …) and
  the `health` evidence object the execution report carries.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal, Protocol

from fleet_agent.executors.base import COMPLETED, Target, TestOutcome, TestRun, errored, utc_now
from fleet_agent.executors.snapshot import FabricSnapshot, HealthSnapshot
from fleet_agent.fabric import fabric_evidence, fabric_metrics
from fleet_agent.gpus import GpuVendor, gpu_vendor
from fleet_agent.parsers import Metrics, ParseError
from fleet_agent.parsers.dmi import parse_dmi
from fleet_agent.parsers.ib_counters import parse_ib_counters
from fleet_agent.parsers.ibstat import parse_ibstat
from fleet_agent.parsers.kernel_log import XidEvent
from fleet_agent.parsers.nvidia_smi_xml import THROTTLE_REASONS

__all__ = [
    "HARDWARE_PARTS",
    "HEALTH_WINDOW_TEST",
    "MAX_XID_EVENTS",
    "NOT_CONFIGURED",
    "FabricSnapshot",
    "HardwareSource",
    "HealthSnapshot",
    "JobHardware",
    "Reading",
    "collect_inventory",
    "fabric_snapshot",
    "health_snapshot",
    "health_window",
    "job_start",
    "member_windows",
]

logger = logging.getLogger("fleet_agent.hardware")

#: The test the runner runs last in a job: the health evidence of the job's window.
HEALTH_WINDOW_TEST = "health-window"
#: What a hardware source can be asked to read.
HARDWARE_PARTS: tuple[str, ...] = ("gpu_inventory", "gpu_health", "ibstat", "ib_counters", "dmi", "kernel_log")
#: The problem of a reading whose part the source was not told how to read: for `ib_counters`, a site without
#: InfiniBand (or that does not read it), which leaves the fabric metrics out rather than erroring the window.
NOT_CONFIGURED = "not configured"
#: At most this many events travel in `health.xid_events`, the fatal ones first (the counts in the metrics are
#: always complete).
MAX_XID_EVENTS = 200

#: `collective`: the kernel log of a multi-node collective's window, read on each member node.
Phase = Literal["inventory", "before", "after", "collective"]


def _kept(events: list[XidEvent]) -> list[XidEvent]:
    """The events that travel: every fatal one first (the service moves the device on them), then the
    others, at most `MAX_XID_EVENTS`, each group in log order."""
    return ([e for e in events if e.fatal] + [e for e in events if not e.fatal])[:MAX_XID_EVENTS]


@dataclass(frozen=True)
class Reading:
    """A tool's output, or why there is none; `source` names the tool that answered (the kernel log's
    `journalctl`, `dmesg` or `simulated`)."""

    text: str | None
    problem: str | None = None
    source: str | None = None


class HardwareSource(Protocol):
    """Reads one part of a device's hardware state (`HARDWARE_PARTS`); never raises for a failing tool."""

    def read(
        self,
        part: str,
        target: Target,
        *,
        phase: Phase,
        since: datetime | None = None,
        until: datetime | None = None,
    ) -> Reading: ...


@dataclass
class _Inventory:
    driver_version: str | None = None
    cuda_version: str | None = None
    gpus: list[dict[str, Any]] = field(default_factory=list)
    hcas: list[dict[str, Any]] = field(default_factory=list)
    host: dict[str, Any] = field(default_factory=lambda: {"bios_version": None, "system_serial": None})
    missing: list[str] = field(default_factory=list)


def collect_inventory(source: HardwareSource, target: Target, gpu_inventory: Reading | None = None) -> dict[str, Any]:
    """The device's inventory in the wire form of the execution report (see docs/agent.md), its GPUs read by the
    device's vendor's tool (`fleet_agent.gpus`); `gpu_inventory` is a reading already taken (the job's start
    reads it once, and for NVIDIA also for the health snapshot)."""
    inventory = _Inventory()
    vendor = gpu_vendor(target.gpu_vendor)
    gpu_reading = gpu_inventory or source.read("gpu_inventory", target, phase="inventory")
    gpus = _parsed(gpu_reading, vendor.tool, vendor.parse_inventory, inventory)
    if gpus is not None:
        inventory.driver_version = gpus["driver_version"]
        inventory.cuda_version = gpus["cuda_version"]
        inventory.gpus = gpus["gpus"]
    hcas = _parsed(source.read("ibstat", target, phase="inventory"), "ibstat", parse_ibstat, inventory)
    if hcas is not None:
        inventory.hcas = hcas["hcas"]
    host = _parsed(source.read("dmi", target, phase="inventory"), "dmi", parse_dmi, inventory)
    if host is not None:
        inventory.missing.extend(host.pop("missing"))
        inventory.host = host
    return {
        "driver_version": inventory.driver_version,
        "cuda_version": inventory.cuda_version,
        "gpus": inventory.gpus,
        "hcas": inventory.hcas,
        "host": inventory.host,
        "missing": inventory.missing,
    }


def _parsed(reading: Reading, what: str, parse: Any, inventory: _Inventory) -> dict[str, Any] | None:
    if reading.text is None:
        inventory.missing.append(f"{what}: {reading.problem or 'not read'}")
        return None
    try:
        parsed: dict[str, Any] = parse(reading.text)
    except ParseError as exc:
        inventory.missing.append(f"{what}: {exc}")
        return None
    return parsed


def health_snapshot(
    source: HardwareSource, target: Target, phase: Phase = "before", reading: Reading | None = None
) -> HealthSnapshot:
    """The device's GPU health (ECC, row remaps, throttling) now, or in `reading` (taken just now), read by its
    vendor's tool."""
    at = utc_now()
    vendor = gpu_vendor(target.gpu_vendor)
    reading = reading or source.read("gpu_health", target, phase=phase)
    if reading.text is None:
        return HealthSnapshot(at, None, f"{vendor.tool}: {reading.problem or 'not read'}", vendor.health_counters)
    try:
        return HealthSnapshot(at, vendor.parse_health(reading.text), None, vendor.health_counters)
    except ParseError as exc:
        return HealthSnapshot(at, None, f"{vendor.tool}: {exc}", vendor.health_counters)


def fabric_snapshot(source: HardwareSource, target: Target, phase: Phase = "before") -> FabricSnapshot:
    """The device's InfiniBand ports' error counters now (`ports` None and no problem when the source is not
    configured to read them)."""
    at = utc_now()
    reading = source.read("ib_counters", target, phase=phase)
    if reading.text is None:
        if reading.problem == NOT_CONFIGURED:
            return FabricSnapshot(at, None)
        return FabricSnapshot(at, None, f"ib_counters: {reading.problem or 'not read'}")
    try:
        parsed = parse_ib_counters(reading.text)
    except ParseError as exc:
        return FabricSnapshot(at, None, f"ib_counters: {exc}")
    return FabricSnapshot(at, parsed["ports"], None, parsed["source"])


@dataclass(frozen=True)
class JobHardware:
    """What the agent read about a single-device job's hardware at its start: the inventory every execution
    report of the job carries, and where the health window starts with the snapshots read then."""

    inventory: dict[str, Any] | None = None
    since: datetime | None = None
    before: HealthSnapshot | None = None
    fabric_before: FabricSnapshot | None = None


def job_start(source: HardwareSource, target: Target, *, report_hardware: bool, window: bool) -> JobHardware:
    """The device's inventory (when `report_hardware`) and, when the job has a health window, the GPU health and
    InfiniBand counters it starts from. A reading that raises is logged and leaves what it would have read None."""
    since = datetime.now(UTC)
    inventory = before = fabric_before = None
    if not report_hardware and not window:
        return JobHardware()
    try:
        gpus = source.read("gpu_inventory", target, phase="before") if report_hardware else None
        if gpus is not None:
            inventory = collect_inventory(source, target, gpu_inventory=gpus)
            if inventory["missing"]:
                logger.warning("inventory of %s: missing %s", target.hostname, "; ".join(inventory["missing"]))
        if window:  # NVIDIA's one reading answers both GPU parts; other vendors read their health tool
            shared = gpus if gpu_vendor(target.gpu_vendor).health_from_inventory else None
            before = health_snapshot(source, target, "before", reading=shared)
            fabric_before = fabric_snapshot(source, target, "before")
    except Exception:
        logger.exception("reading the hardware of %s failed", target.hostname)
    return JobHardware(inventory=inventory, since=since, before=before, fabric_before=fabric_before)


def member_windows(
    source: HardwareSource, targets: Sequence[Target], since: datetime, until: datetime
) -> list[dict[str, Any]]:
    """The kernel-logged GPU events of each member node of a multi-node collective during its window, in the wire
    form of the report's `member_health` (`device_id`, and `health` as a health window's, events only): the
    service judges them together (a burst is the workload's, docs/remediation.md). The kernel log is read and
    parsed as the `health-window` test reads it; a node whose log cannot be read is left out, logged."""
    members: list[dict[str, Any]] = []
    for target in targets:
        try:
            log = source.read("kernel_log", target, phase="collective", since=since, until=until)
            if log.text is None:
                logger.warning("kernel log of %s not read: %s", target.hostname, log.problem or "not read")
                continue
            events = gpu_vendor(target.gpu_vendor).kernel_events(log.text, since, until)
        except Exception:  # one node's unreadable log must not lose the collective's result
            logger.exception("reading the kernel log of %s failed", target.hostname)
            continue
        health = {
            "window": {"since": _iso(since), "until": _iso(until)},
            "source": log.source or "unknown",
            "xid_events": [event.as_json() for event in _kept(events)],
        }
        members.append({"device_id": target.device_id, "health": health})
    return members


def health_window(source: HardwareSource, run: TestRun) -> TestOutcome:
    """The `health-window` test of `run` (one device): the kernel log of the window from `run.window_since`
    (default: now) to now, the health snapshot and InfiniBand counters after, and the ones from
    `run.health_before` and `run.fabric_before` (default: read now; the counters only where configured).
    Errored — never passed — when any of them cannot be read."""
    started_at = utc_now()
    if len(run.targets) != 1:
        return errored(f"test {run.test} runs on one device, got {len(run.targets)}", started_at)
    target = run.targets[0]
    vendor: GpuVendor = gpu_vendor(target.gpu_vendor)
    since = run.window_since or started_at
    before = run.health_before or health_snapshot(source, target, "before")
    fabric_before = run.fabric_before or fabric_snapshot(source, target, "before")
    after = health_snapshot(source, target, "after")
    fabric_after = fabric_snapshot(source, target, "after")
    until = utc_now()
    log = source.read("kernel_log", target, phase="after", since=since, until=until)
    finished_at = utc_now()
    for problem in (
        before.problem and f"the health snapshot at the start of the window could not be read: {before.problem}",
        after.problem and f"the health snapshot at the end of the window could not be read: {after.problem}",
        log.text is None and f"the kernel log could not be read: {log.problem or 'not read'}",
        fabric_before.problem
        and f"the InfiniBand counters at the start of the window could not be read: {fabric_before.problem}",
        fabric_after.problem
        and f"the InfiniBand counters at the end of the window could not be read: {fabric_after.problem}",
    ):
        if problem:
            return errored(problem, started_at, finished_at)
    assert log.text is not None and before.metrics is not None and after.metrics is not None
    try:
        events = vendor.kernel_events(log.text, since, until)
    except ParseError as exc:
        return errored(f"the kernel log could not be read: {exc}", started_at, finished_at)

    metrics: Metrics = {name: dict(entry) for name, entry in after.metrics.items()}
    metrics.update(vendor.kernel_metrics(events))
    metrics["ecc_uncorrected_delta"] = _delta(before.metrics, after.metrics, vendor.ecc_uncorrected)
    seen = sorted(set(vendor.throttle_reasons(before.metrics)) | set(vendor.throttle_reasons(after.metrics)))
    if vendor.slowdown is not None:
        metrics["hw_slowdown_seen"] = _seen(before.metrics, after.metrics, vendor.slowdown)
    health = {
        "window": {"since": _iso(since), "until": _iso(until)},
        "source": log.source or "unknown",
        "xid_events": [event.as_json() for event in _kept(events)],
        "ecc": {"before": before.values(), "after": after.values()},
        "throttle_reasons_seen": [reason for reason in THROTTLE_REASONS if reason in seen],
    }
    if fabric_before.ports is not None and fabric_after.ports is not None:
        metrics.update(fabric_metrics(fabric_before.ports, fabric_after.ports))
        health["fabric"] = fabric_evidence(fabric_after.source or "sysfs", fabric_before.ports, fabric_after.ports)
    return TestOutcome(
        status=COMPLETED,
        metrics=metrics,
        error=None,
        started_at=started_at,
        finished_at=finished_at,
        health=health,
    )


def _delta(before: Metrics, after: Metrics, name: str) -> dict[str, Any]:
    """after − before, summed over GPUs (per GPU in statistics); no value when either side lacks a GPU's count
    or the GPUs differ (a GPU that vanished or appeared is not a zero)."""
    first = before.get(name, {}).get("statistics") or {}
    second = after.get(name, {}).get("statistics") or {}
    statistics: dict[str, float | None] = {}
    for bus in second:
        a, b = first.get(bus), second.get(bus)
        statistics[bus] = b - a if isinstance(a, int | float) and isinstance(b, int | float) else None
    entry: dict[str, Any] = {"statistics": statistics}
    if set(first) == set(second) and statistics and all(value is not None for value in statistics.values()):
        entry["value"] = sum(value for value in statistics.values() if value is not None)
    return entry


def _seen(before: Metrics, after: Metrics, name: str) -> dict[str, Any]:
    """1 when the reason was active on any GPU at either end of the window, 0 when every GPU reported it
    inactive at both ends, no value otherwise."""
    sides = [before.get(name, {}), after.get(name, {})]
    statistics: dict[str, float | None] = {}
    for side in sides:
        for bus, value in (side.get("statistics") or {}).items():
            if value:
                statistics[bus] = 1
            elif bus not in statistics or statistics[bus] == 0:
                statistics[bus] = value if value is None else 0
    if any(side.get("value") for side in sides):
        return {"value": 1, "statistics": statistics}
    if all("value" in side for side in sides):
        return {"value": 0, "statistics": statistics}
    return {"statistics": statistics}


def _iso(moment: datetime) -> str:
    return moment.astimezone(UTC).isoformat().replace("+00:00", "Z")
