"""The inventory sweep (`inventory_interval`): read the hardware of the satellite's devices that run no
burn-in jobs — those `accepted` or `in_service` — and report it (`POST /api/v1/satellites/fingerprints/`),
so that a GPU swapped on an accepted device is noticed: the service supersedes the certificate that bound
the old hardware (`hardware_changed`) as it does when a job's report carries another inventory
(docs/agent.md, "The inventory sweep").

Load (the service's node states, every page), read (each device's inventory with the executor's hardware
source, whose every tool runs under its timeout), write (bounded batches). A device whose GPUs cannot be
read is logged and skipped: an inventory without them would only add a snapshot that says nothing, never a
changed fingerprint. An executor that reads no hardware sweeps nothing and says so once (the Slurm executor
reads hardware in burn-in jobs only: the runner does not sweep with it).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from fleet_agent.client import FleetClient
from fleet_agent.executors.base import Target
from fleet_agent.executors.hardware import HardwareSource, collect_inventory
from fleet_agent.gpus import DEFAULT_GPU_VENDOR, gpu_vendor
from fleet_agent.node_gate import node_states

logger = logging.getLogger("fleet_agent.inventory_sweep")

#: The lifecycle states whose devices run no jobs, so only the sweep reads their hardware.
SWEPT_STATES = frozenset({"accepted", "in_service"})
#: Devices one request carries (the service's bound).
BATCH = 100


@dataclass
class SweepReport:
    """What one sweep did (`fleet-agent once` prints it)."""

    devices: int = 0  # accepted or in service
    reported: int = 0
    skipped: list[str] = field(default_factory=list)  # hostname: why
    changed: list[str] = field(default_factory=list)  # hostnames whose fingerprint moved
    superseded: list[str] = field(default_factory=list)  # hostnames whose certificate it superseded
    failed_batches: int = 0


def swept_devices(
    states: Sequence[dict[str, Any]], vendor_of: Callable[[str], str] = lambda _: DEFAULT_GPU_VENDOR
) -> list[Target]:
    """The devices the sweep reads: accepted or in service, as targets whose GPUs `vendor_of` their class made
    (`amd-smi static` reads an AMD node's)."""
    return [
        Target(str(item["device_id"]), str(item["hostname"]), rc, vendor_of(rc))
        for item in states
        if item.get("state") in SWEPT_STATES
        for rc in (str(item.get("resource_class") or ""),)
    ]


def read_inventory(source: HardwareSource, target: Target) -> tuple[dict[str, Any] | None, str | None]:
    """The device's inventory, or None and why it is skipped (nothing raised)."""
    try:
        inventory = collect_inventory(source, target)
    except Exception as exc:  # a source must not raise; if one does, this device is skipped, not the sweep
        return None, f"reading its hardware failed: {exc}"
    tool = gpu_vendor(target.gpu_vendor).tool
    gpus = [m for m in inventory["missing"] if m.startswith(f"{tool}:")]
    if gpus:
        return None, f"its GPUs could not be read ({gpus[0]})"
    return inventory, None


def inventory_sweep(
    client: FleetClient,
    source: HardwareSource | None,
    *,
    site: str,
    satellite: str,
    batch: int = BATCH,
    stopping: Callable[[], bool] = lambda: False,
    vendor_of: Callable[[str], str] = lambda _: DEFAULT_GPU_VENDOR,
) -> SweepReport:
    report = SweepReport()
    if source is None:
        logger.info("inventory sweep: this executor reads no hardware; nothing swept")
        return report
    targets = swept_devices(node_states(client, site, satellite), vendor_of)
    report.devices = len(targets)
    pending: list[dict[str, Any]] = []
    for target in targets:
        if stopping():
            break
        inventory, why = read_inventory(source, target)
        if inventory is None:
            logger.warning("inventory sweep: %s skipped: %s", target.hostname, why)
            report.skipped.append(f"{target.hostname}: {why}")
            continue
        if inventory["missing"]:
            logger.info("inventory sweep: %s: missing %s", target.hostname, "; ".join(inventory["missing"]))
        pending.append({"hostname": target.hostname, "inventory": inventory})
        if len(pending) >= batch:
            _post(client, site, satellite, pending, report)
            pending = []
    if pending:
        _post(client, site, satellite, pending, report)
    logger.info(
        "inventory sweep: %d device(s) accepted or in service, %d reported, %d skipped, %d changed, %d superseded",
        report.devices,
        report.reported,
        len(report.skipped),
        len(report.changed),
        len(report.superseded),
    )
    return report


def _post(client: FleetClient, site: str, satellite: str, devices: list[dict[str, Any]], report: SweepReport) -> None:
    try:
        answer = client.report_fingerprints(site, satellite, devices)
    except Exception:
        logger.exception(
            "inventory sweep: reporting %d device(s) failed; the next sweep reads them again", len(devices)
        )
        report.failed_batches += 1
        return
    for item in answer.get("results", []):
        report.reported += 1
        if item.get("created"):
            report.changed.append(str(item.get("hostname")))
        if item.get("superseded"):
            report.superseded.append(str(item.get("hostname")))
            logger.warning(
                "inventory sweep: %s: its hardware changed; certificate %s superseded (hardware_changed)",
                item.get("hostname"),
                item.get("superseded"),
            )
