"""The simulated fleet's hardware: what `nvidia-smi -q -x`, `ibstat`, the DMI table and the kernel log would print
for a simulated device, rendered as those tools' text so that the real parsers read it (the simulated inventory
and health window therefore have exactly the shapes of real ones).

A device's identity (GPU serials and UUIDs, HCA GUIDs, BIOS version, system serial) is a pure function of its
device id, not of the seed, so an agent restarted with another seed still sees the same hardware. Fault knobs:

* **a swapped GPU**: `swaps_file` (`simulated-swaps.json` in the agent's state directory) maps a device id or
  hostname to the indices of its GPUs that were replaced, e.g. `{"a01-n02": [3]}`; each listing of an index is
  one more replacement, so that GPU gets a new serial and UUID. It is read on every collection, so a swap
  recorded while the agent runs shows in the device's next job.
* **health faults** (`health_faults`, hostnames or ids): `xid` (a fatal Xid 79 logged mid-window, or `xid=48`
  for another code), `ecc` (two uncorrectable DRAM errors during the window), `remap` (a row remap pending after
  the window), `slowdown` (HW slowdown active at the end of the window), `flap` (the first InfiniBand port's link
  went down and came back three times during the window: `link_downed` grows by 3) and `symbol` (its symbol errors
  grow by 1,200 and its receive errors by 40: a bad cable or transceiver). The burn-in tests of such a device still
  pass: only the `health-window` test sees the fault. An `xid` fault persists whatever the node does;
  `transient` (an Xid 95, or `transient=79` for another code) is logged until the node takes a step of the
  remediation ladder (`remedy`: a GPU reset or a reboot cures it, as a transient fault would be). `crash` (an
  Xid 13, or `crash=31` for another code) is a workload that crashed: it is logged only in the window of a
  multi-node collective (the kernel log read with phase `collective`), never in a health window; put it on every
  node of a rack for a job-wide burst (docs/remediation.md).
* **InfiniBand counters** (`ib_counters`) print as `grep -H .` over `/sys/class/infiniband/*/ports/*/counters/…`
  would, for every NIC of the class (RoCE ones too); each port starts from a small count of its own (a link that
  trained with a few symbol errors at installation), which a healthy window does not move.
* **AMD Instinct nodes** (`gpu.mi300x.8x`) print `amd-smi static --json`, `amd-smi metric --json` and amdgpu
  kernel-log lines instead (`fleet_agent.executors.simulated_amd`); their health faults are `ecc` (a bad HBM
  stack: UMC uncorrectable errors logged and counted), `reset` (a ring timeout and a GPU reset in the window),
  `ras` or `xid` (a fatal RAS interrupt) and `slowdown` (GPU 0 throttled). An agent that reads a device as the
  other vendor's (its `gpu_vendors` wrong) finds the tool missing, as it would on a real node.
"""

from __future__ import annotations

import hashlib
import json
import uuid
import xml.etree.ElementTree as ET
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from fleet_agent.executors.base import RemedyResult, RemedyRun, Target
from fleet_agent.executors.hardware import Phase, Reading
from fleet_agent.executors.simulated_amd import AMD_CLASSES, amd_smi_metric, amd_smi_static, amdgpu_kernel_log
from fleet_agent.parsers.ib_counters import IB_COUNTERS
from fleet_rules.xid import FATAL_XID

__all__ = [
    "HEALTH_FAULT_KINDS",
    "SIMULATED_SWAPS",
    "HealthFault",
    "SimulatedHardware",
    "gpu_serial",
    "parse_health_faults",
]

#: The technician's log of swapped GPUs, in the agent's state directory.
SIMULATED_SWAPS = "simulated-swaps.json"
#: The devices that took a ladder step, in the agent's state directory (beside `SIMULATED_SWAPS`).
SIMULATED_REMEDIED = "simulated-remedied.json"
HEALTH_FAULT_KINDS: tuple[str, ...] = (
    "xid", "ecc", "remap", "slowdown", "reset", "ras", "flap", "symbol", "transient", "crash",
)  # fmt: skip
_CODED = {"xid": 79, "transient": 95, "crash": 13}  # the kinds that take a code, and their default


@dataclass(frozen=True)
class HealthFault:
    """One health fault of a simulated device: its kind and, for `xid`, the code logged."""

    kind: str
    code: int | None = None


def parse_health_faults(spec: str) -> dict[str, tuple[HealthFault, ...]]:
    """`host:kind[=code],…` → device (hostname or id) → its faults; `ValueError` names a bad entry."""
    faults: dict[str, list[HealthFault]] = {}
    for entry in (part.strip() for part in spec.split(",")):
        if not entry:
            continue
        device, _, fault = entry.rpartition(":")
        kind, _, code = fault.partition("=")
        if not device or kind not in HEALTH_FAULT_KINDS:
            raise ValueError(
                f"health_faults: {entry!r} is not <hostname>:<kind> with kind one of {', '.join(HEALTH_FAULT_KINDS)}"
            )
        if code and (kind not in _CODED or not code.isdigit()):
            raise ValueError(f"health_faults: {entry!r}: only xid, transient and crash take a code (xid=79)")
        faults.setdefault(device, []).append(HealthFault(kind, int(code) if code else _CODED.get(kind)))
    return {device: tuple(entries) for device, entries in faults.items()}


@dataclass(frozen=True)
class _Platform:
    product_name: str
    driver_version: str
    cuda_version: str
    vbios_version: str
    part_number: str
    bus_ids: tuple[str, ...]
    hca_firmware: str
    hca_rate_gbps: int
    hcas: int
    bios_version: str
    vendor: str = "nvidia"  # who made the GPUs: which tool's output the simulation prints for them


_PLATFORMS: Mapping[str, _Platform] = {
    "gpu.h200.8x": _Platform(
        product_name="NVIDIA H200",
        driver_version="550.127.08",
        cuda_version="12.4",
        vbios_version="96.00.A5.00.01",
        part_number="SIM-H200-SXM5-141GB",
        bus_ids=tuple(f"00000000:{bus}:00.0" for bus in ("19", "3B", "4C", "5D", "9B", "BB", "CB", "DB")),
        hca_firmware="28.39.1002",
        hca_rate_gbps=400,
        hcas=8,
        bios_version="SIM-2.3.5",
    ),
    "gpu.gb200.nvl72": _Platform(
        product_name="NVIDIA GB200",
        driver_version="570.133.20",
        cuda_version="12.8",
        vbios_version="97.00.5B.00.0B",
        part_number="SIM-GB200-186GB",
        bus_ids=("00000008:01:00.0", "00000009:01:00.0", "00000018:01:00.0", "00000019:01:00.0"),
        hca_firmware="28.43.1014",
        hca_rate_gbps=400,
        hcas=4,
        bios_version="SIM-1.4.0",
    ),
    # AMD Instinct MI300X (the GPUs' own figures: fleet_agent.executors.simulated_amd), 8x 400G RoCE NICs.
    "gpu.mi300x.8x": _Platform(
        product_name="AMD Instinct MI300X",
        driver_version="6.10.5",
        cuda_version="",
        vbios_version="022.040.003.043.000001",
        part_number="113-M3000100-102",
        bus_ids=AMD_CLASSES["gpu.mi300x.8x"].bus_ids,
        hca_firmware="28.41.1000",
        hca_rate_gbps=400,
        hcas=8,
        bios_version="SIM-3.1.0",
        vendor="amd",
    ),
}


class SimulatedHardware:
    """A `HardwareSource` over the simulated fleet (see the module docstring)."""

    def __init__(
        self, health_faults: Mapping[str, tuple[HealthFault, ...]] | None = None, swaps_file: Path | None = None
    ) -> None:
        self.health_faults = dict(health_faults or {})
        self.swaps_file = swaps_file
        # devices that took a ladder step (their transient faults are gone), kept beside the swaps file
        self.remedied_file = swaps_file.with_name(SIMULATED_REMEDIED) if swaps_file is not None else None
        self._remedied: set[str] = set()

    @property
    def remedied(self) -> set[str]:
        try:
            kept = set(json.loads(self.remedied_file.read_text())) if self.remedied_file else set()
        except (OSError, ValueError):
            kept = set()
        return kept | self._remedied

    def remedy(self, run: RemedyRun) -> RemedyResult:
        """The node takes a step of the remediation ladder: its transient faults are cured, its others stay."""
        self._remedied.add(run.target.device_id)
        if self.remedied_file is not None:
            self.remedied_file.parent.mkdir(parents=True, exist_ok=True)
            self.remedied_file.write_text(json.dumps(sorted(self.remedied | {run.target.device_id})))
        return RemedyResult(True, f"simulated {run.step} of {run.target.hostname}")

    def read(
        self,
        part: str,
        target: Target,
        *,
        phase: Phase,
        since: datetime | None = None,
        until: datetime | None = None,
    ) -> Reading:
        platform = _PLATFORMS.get(target.resource_class)
        if platform is None:
            return Reading(None, f"the simulation has no hardware model for {target.resource_class}")
        faults = self.faults_of(target)
        if part in ("gpu_inventory", "gpu_health") and target.gpu_vendor != platform.vendor:
            # the agent reads it with the other vendor's tool, which this node does not have
            return Reading(None, f"command not found (the simulated {target.resource_class} has {platform.vendor} "
                                 "GPUs; is its class's gpu_vendor right?)")  # fmt: skip
        if part == "ib_counters":
            return Reading(_ib_counters(target, platform, faults, phase))
        if platform.vendor == "amd" and part != "ibstat" and part != "dmi":
            return self._amd(part, target, faults, phase, since, until)
        if part in ("gpu_inventory", "gpu_health"):  # nvidia-smi -q -x answers for both
            return Reading(self._nvidia_smi(target, platform, faults, phase))
        if part == "ibstat":
            return Reading(_ibstat(target, platform))
        if part == "dmi":
            return Reading(
                f"/sys/class/dmi/id/bios_version:{platform.bios_version}\n"
                f"/sys/class/dmi/id/product_serial:SIM{_digits(target.device_id, 'system', 10)}\n"
            )
        if part == "kernel_log":
            # a workload crash (`crash`) shows only in a collective's window; the node's own faults in every window
            shown = tuple(f for f in faults if (f.kind == "crash") == (phase == "collective"))
            return Reading(_kernel_log(target, platform, shown, since, until), source="simulated")
        return Reading(None, f"the simulation cannot read {part}")

    def faults_of(self, target: Target) -> tuple[HealthFault, ...]:
        faults = self.health_faults.get(target.device_id, ()) + self.health_faults.get(target.hostname, ())
        if target.device_id in self.remedied:
            return tuple(f for f in faults if f.kind != "transient")
        return faults

    def swaps(self, target: Target) -> dict[int, int]:
        """GPU index → how many times it was replaced (`swaps_file`); none when the file is absent or unreadable."""
        if self.swaps_file is None:
            return {}
        try:
            listed = json.loads(self.swaps_file.read_text())
        except (OSError, ValueError):
            return {}
        if not isinstance(listed, dict):
            return {}
        generations: dict[int, int] = {}
        for key in (target.device_id, target.hostname):
            indices = listed.get(key)
            if isinstance(indices, list):
                for index in indices:
                    if isinstance(index, int) and not isinstance(index, bool):
                        generations[index] = generations.get(index, 0) + 1
        return generations

    def _amd(
        self,
        part: str,
        target: Target,
        faults: tuple[HealthFault, ...],
        phase: Phase,
        since: datetime | None,
        until: datetime | None,
    ) -> Reading:
        """`amd-smi static --json`, `amd-smi metric --json` or the window's amdgpu kernel-log lines."""
        hardware = AMD_CLASSES[target.resource_class]
        kinds = {fault.kind for fault in faults}
        after = phase == "after"
        if part == "gpu_inventory":
            swaps = self.swaps(target)
            serials = [gpu_serial(target.device_id, index, swaps.get(index, 0)) for index in range(hardware.gpus)]
            return Reading(amd_smi_static(hardware, serials))
        if part == "gpu_health":
            return Reading(amd_smi_metric(hardware, uncorrectable=2 if after and "ecc" in kinds else 0,
                                          throttled=after and "slowdown" in kinds))  # fmt: skip
        if part == "kernel_log":
            start = since or datetime.now(UTC)
            moment = (start + ((until or start) - start) / 2).astimezone(UTC)
            lines = amdgpu_kernel_log(target.hostname, hardware.bus_ids[0], kinds, moment)
            return Reading("".join(f"{line}\n" for line in lines), source="simulated")
        return Reading(None, f"the simulation cannot read {part}")

    def _nvidia_smi(self, target: Target, platform: _Platform, faults: tuple[HealthFault, ...], phase: Phase) -> str:
        kinds = {fault.kind for fault in faults}
        after = phase == "after"
        swaps = self.swaps(target)
        root = ET.Element("nvidia_smi_log")
        _leaf(root, "timestamp", "simulated")
        _leaf(root, "driver_version", platform.driver_version)
        _leaf(root, "cuda_version", platform.cuda_version)
        _leaf(root, "attached_gpus", str(len(platform.bus_ids)))
        for index, bus in enumerate(platform.bus_ids):
            faulty_gpu = index == 0  # the simulated faults sit on the first GPU
            generation = swaps.get(index, 0)
            gpu = ET.SubElement(root, "gpu", id=bus)
            _leaf(gpu, "product_name", platform.product_name)
            _leaf(gpu, "serial", gpu_serial(target.device_id, index, generation))
            _leaf(gpu, "uuid", f"GPU-{uuid.UUID(bytes=_digest(target.device_id, f'uuid{index}/{generation}')[:16])}")
            _leaf(gpu, "vbios_version", platform.vbios_version)
            _leaf(gpu, "board_part_number", platform.part_number)
            pci = ET.SubElement(gpu, "pci")
            _leaf(pci, "pci_bus_id", bus)
            reasons = ET.SubElement(gpu, "clocks_event_reasons")
            for reason in ("gpu_idle", "sw_power_cap", "hw_slowdown", "hw_thermal_slowdown",
                           "hw_power_brake_slowdown", "sw_thermal_slowdown"):  # fmt: skip
                active = after and faulty_gpu and "slowdown" in kinds and reason == "hw_slowdown"
                _leaf(reasons, f"clocks_event_reason_{reason}", "Active" if active else "Not Active")
            dram_errors = 2 if after and faulty_gpu and "ecc" in kinds else 0
            ecc = ET.SubElement(gpu, "ecc_errors")
            for scope in ("volatile", "aggregate"):
                counters = ET.SubElement(ecc, scope)
                for name, value in (("sram_correctable", 0), ("sram_uncorrectable", 0), ("dram_correctable", 0),
                                    ("dram_uncorrectable", dram_errors)):  # fmt: skip
                    _leaf(counters, name, str(value))
            retired = ET.SubElement(gpu, "retired_pages")
            for name in ("multiple_single_bit_retirement", "double_bit_retirement"):
                _leaf(ET.SubElement(retired, name), "retired_count", "N/A")
            _leaf(retired, "pending_blacklist", "N/A")
            _leaf(retired, "pending_retirement", "N/A")
            remapped = ET.SubElement(gpu, "remapped_rows")
            pending = after and faulty_gpu and "remap" in kinds
            _leaf(remapped, "remapped_row_corr", "0")
            _leaf(remapped, "remapped_row_unc", "1" if pending else "0")
            _leaf(remapped, "remapped_row_pending", "Yes" if pending else "No")
            _leaf(remapped, "remapped_row_failure", "No")
        return '<?xml version="1.0" ?>\n' + ET.tostring(root, encoding="unicode") + "\n"


def _ibstat(target: Target, platform: _Platform) -> str:
    lines = []
    for index in range(platform.hcas):
        guid = "0x" + _digest(target.device_id, f"hca{index}").hex()[:16]
        lines += [
            f"CA 'mlx5_{index}'",
            "\tCA type: MT4129",
            "\tNumber of ports: 1",
            f"\tFirmware version: {platform.hca_firmware}",
            "\tHardware version: 0",
            f"\tNode GUID: {guid}",
            f"\tSystem image GUID: {guid}",
            "\tPort 1:",
            "\t\tState: Active",
            "\t\tPhysical state: LinkUp",
            f"\t\tRate: {platform.hca_rate_gbps}",
            "\t\tLink layer: InfiniBand",
        ]
    return "\n".join(lines) + "\n"


def _ib_counters(target: Target, platform: _Platform, faults: tuple[HealthFault, ...], phase: Phase) -> str:
    """`grep -H . /sys/class/infiniband/*/ports/*/counters/<IB_COUNTERS> /sys/class/infiniband/*/ports/*/state`."""
    kinds = {fault.kind for fault in faults}
    after = phase == "after"
    lines = []
    for index in range(platform.hcas):
        base = f"/sys/class/infiniband/mlx5_{index}/ports/1"
        seed = _digest(target.device_id, f"ib{index}")
        counts = dict.fromkeys(IB_COUNTERS, 0)
        counts["link_downed"] = seed[0] % 2  # the link trained twice at installation, or once
        counts["symbol_error"] = seed[1] % 7
        counts["port_rcv_errors"] = seed[2] % 20
        faulty = after and index == 0  # the simulated faults sit on the first port
        if faulty and "flap" in kinds:
            counts["link_downed"] += 3
            counts["link_error_recovery"] += 3
        if faulty and "symbol" in kinds:
            counts["symbol_error"] += 1200
            counts["port_rcv_errors"] += 40
        lines += [f"{base}/counters/{name}:{counts[name]}" for name in IB_COUNTERS]
        lines.append(f"{base}/state:4: ACTIVE")
    return "".join(f"{line}\n" for line in lines)


def _kernel_log(
    target: Target,
    platform: _Platform,
    faults: tuple[HealthFault, ...],
    since: datetime | None,
    until: datetime | None,
) -> str:
    """`journalctl -k -o short-iso-precise` of the window: nothing from a healthy device, the Xid line otherwise."""
    lines = []
    start = since or datetime.now(UTC)
    end = until or start
    moment = start + (end - start) / 2
    stamp = moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%f+0000")
    pci = platform.bus_ids[0][4:-2].lower()  # 00000000:19:00.0 → 0000:19:00, as the driver prints it
    for fault in faults:
        if fault.kind in _CODED and fault.code is not None:
            meaning = FATAL_XID[fault.code].meaning if fault.code in FATAL_XID else "simulated GPU error"
            lines.append(
                f"{stamp} {target.hostname} kernel: NVRM: Xid (PCI:{pci}): {fault.code}, pid='<unknown>', "
                f"name=<unknown>, {meaning}"
            )
    return "".join(f"{line}\n" for line in lines)


def _leaf(parent: ET.Element, tag: str, text: str) -> None:
    ET.SubElement(parent, tag).text = text


def gpu_serial(device_id: str, index: int, generation: int = 0) -> str:
    """The serial a simulated GPU reports: of the board first installed in slot `index` (generation 0),
    or of its `generation`-th replacement (what a technician who swapped it reads off the new board)."""
    return "1654" + _digits(device_id, f"gpu{index}/{generation}", 9)


def _digest(*parts: str) -> bytes:
    return hashlib.sha256("\x1f".join(("simulated-hardware", *parts)).encode("utf-8")).digest()


def _digits(device_id: str, what: str, count: int) -> str:
    return str(int.from_bytes(_digest(device_id, what)[:8], "big") % 10**count).zfill(count)
