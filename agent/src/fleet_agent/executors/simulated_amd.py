"""The simulated fleet's AMD Instinct nodes: what their tools would print, rendered as text and read back by the
real parsers (`rvs`, `rccl-tests`, `transferbench`, `amd-smi-static`, `amd-smi-metric`, `kernel-log-amdgpu`), so a
simulated AMD execution or inventory has exactly the shape of a real one.

Healthy figures follow AMD's MI300X acceptance material (examples/fleet.yaml names each threshold's source): an
all_reduce bus bandwidth near 316 GB/s at 8 GB (the real 8 × MI300X log in tests/agent/fixtures/amd/), a
TransferBench all-to-all average near 36 GB/s per link, GST meeting its target on every GPU. Faults:

* `xgmi_slow` (executor fault mode): one GPU's xGMI links run at about 40 % — TransferBench's slowest copy and the
  in-node all_reduce fail, and every rack collective that includes the node is slow;
* `gst_below_target` (executor fault mode): one GPU misses GST's target (`met: FALSE`);
* `nic_degraded` (executor fault mode): the node's rack collectives are slow, its own tests pass;
* health faults, seen only by the health window: `ecc` (a bad HBM stack: the UMC block's uncorrectable errors in
  the kernel log and `amd-smi metric`'s count growing), `reset` (a ring timeout and a GPU reset in the window),
  `ras` or `xid` (the fatal ATHUB RAS interrupt of ROCm issue 4021), `slowdown` (GPU 0 throttled at the end).
"""

from __future__ import annotations

import json
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from fleet_agent.parsers import Metrics
from fleet_agent.parsers.nccl import parse_rccl
from fleet_agent.parsers.rvs import parse_rvs
from fleet_agent.parsers.transferbench import parse_a2a

__all__ = [
    "AMD_CLASSES",
    "AMD_CRASH_TEXTS",
    "AMD_FAULT_MODES",
    "AMD_MULTINODE_TEST",
    "AMD_TESTS",
    "AmdHardware",
    "amd_smi_metric",
    "amd_smi_static",
    "amdgpu_kernel_log",
    "run_amd_test",
]

AMD_MULTINODE_TEST = "rccl-all-reduce-multinode"
AMD_TESTS: tuple[str, ...] = ("rvs-stress", "transferbench-a2a", "rccl-all-reduce", AMD_MULTINODE_TEST)

AMD_FAULT_MODES: Mapping[str, frozenset[str]] = {
    "xgmi_slow": frozenset({"transferbench-a2a", "rccl-all-reduce", AMD_MULTINODE_TEST}),
    "gst_below_target": frozenset({"rvs-stress"}),
    "nic_degraded": frozenset({AMD_MULTINODE_TEST}),
}

#: What the AMD tools print when they die (`{host}`: the node), so errored runs look like the ones operators see.
AMD_CRASH_TEXTS: Mapping[str, str] = {
    "rvs-stress": "rvs exited with status 1 on {host}: [ERROR ] [ 12.5] gst hipGetDeviceCount failed",
    "transferbench-a2a": "TransferBench exited with status 1 on {host}: [ERROR] HIP Error: invalid resource handle",
    "rccl-all-reduce": "all_reduce_perf exited with status 3: {host}: Test HIP failure common.cu:1218 "
    "'hipErrorNoDevice'",
    AMD_MULTINODE_TEST: "mpirun exited with status 137: process rank 11 on node {host} exited on signal 9 (Killed); "
    "RCCL watchdog timeout",
}


@dataclass(frozen=True)
class AmdHardware:
    """Healthy figures of one AMD resource class: counts, (mean, standard deviation) of each measurement, and what
    its `amd-smi static` reports."""

    gpus: int
    market_name: str
    board_name: str
    ifwi_version: str
    ifwi_part_number: str
    driver_version: str
    bus_ids: tuple[str, ...]
    gst_gflops: tuple[float, float]
    gst_target_gflops: float
    iet_power_w: tuple[float, float]
    a2a_link_gbps: tuple[float, float]
    rccl_busbw_gbps: tuple[float, float]
    multinode_busbw_gbps: tuple[float, float]


AMD_CLASSES: Mapping[str, AmdHardware] = {
    # 8x MI300X OAM (CDNA 3, 192 GB HBM3), xGMI mesh (7 links per GPU), 8x 400G RoCE.
    "gpu.mi300x.8x": AmdHardware(
        gpus=8,
        market_name="AMD Instinct MI300X",
        board_name="AMD Instinct MI300X OAM",
        ifwi_version="022.040.003.043.000001",
        ifwi_part_number="113-M3000100-102",
        driver_version="6.10.5",
        bus_ids=tuple(f"0000:{bus}:00.0" for bus in ("05", "25", "45", "65", "85", "a5", "c5", "e5")),
        gst_gflops=(652_000.0, 2_500.0),
        gst_target_gflops=600_000.0,
        iet_power_w=(742.0, 3.0),
        a2a_link_gbps=(35.8, 0.8),
        rccl_busbw_gbps=(316.0, 1.2),
        multinode_busbw_gbps=(355.0, 2.5),
    ),
}


def _normal(rng: random.Random, figure: tuple[float, float]) -> float:
    mean, sigma = figure
    return min(mean + 3 * sigma, max(mean - 3 * sigma, rng.gauss(mean, sigma)))


def _gpu_ids(hardware: AmdHardware) -> list[int]:
    """RVS names GPUs by their KFD id (a 5-digit number), stable per slot."""
    return [10_000 + 4_117 * index for index in range(hardware.gpus)]


def run_amd_test(
    test: str,
    hardware: AmdHardware,
    parameters: Mapping[str, Any],
    *,
    faulty_gpu: int | None,
    degraded: Sequence[bool] = (),
    rng: random.Random,
) -> Metrics:
    """The test's output rendered as its tool prints it, read by the tool's real parser. `faulty_gpu`: the GPU of
    an active fault (None: healthy); `degraded`: per member of a rack collective, whether it slows the ring."""
    if test == "rvs-stress":
        return parse_rvs(_rvs(hardware, faulty_gpu, rng), parameters)
    if test == "transferbench-a2a":
        return parse_a2a(_transferbench(hardware, faulty_gpu, rng), parameters)
    if test == "rccl-all-reduce":
        peak = _normal(rng, hardware.rccl_busbw_gbps) * (rng.uniform(0.72, 0.80) if faulty_gpu is not None else 1)
        return parse_rccl(_rccl(peak, hardware.gpus, _max_bytes(parameters), rng), parameters)
    if test == AMD_MULTINODE_TEST:
        peak = _normal(rng, hardware.multinode_busbw_gbps)
        if any(degraded):
            peak *= rng.uniform(0.68, 0.74)
        ranks = hardware.gpus * max(1, len(degraded))
        return parse_rccl(_rccl(peak, ranks, _max_bytes(parameters), rng), parameters)
    raise ValueError(f"no AMD model for test {test}")


def _max_bytes(parameters: Mapping[str, Any]) -> int:
    try:
        return max(1 << 20, int(parameters.get("max_bytes", 8 << 30)))
    except (TypeError, ValueError):
        return 8 << 30


def _rvs(hardware: AmdHardware, faulty_gpu: int | None, rng: random.Random) -> str:
    """RVS 1.x GST and IET result lines (the layout of the MI355X user guide's samples)."""
    clock = 301_995.0
    lines = []

    def result(text: str) -> None:
        nonlocal clock
        clock += rng.uniform(0.5, 3.0)
        lines.append(f"[RESULT] [{clock:.6f}] {text}")

    gst = "gst-1000Tflops-4K4K8K-rand-fp16"
    result(f"Action name :{gst}")
    result("Module name :gst")
    target = hardware.gst_target_gflops
    for index, gpu in enumerate(_gpu_ids(hardware)):
        gflops = _normal(rng, hardware.gst_gflops)
        if index == faulty_gpu:
            gflops = target * rng.uniform(0.55, 0.75)
        result(f"[{gst}] [GPU:: {gpu}] Start of GPU ramp up")
        result(f"[{gst}] [GPU:: {gpu}] GFLOPS {gflops * 0.5:.0f}")
        result(f"[{gst}] [GPU:: {gpu}] End of GPU ramp up")
        met = "TRUE" if gflops >= target else "FALSE"
        result(f"[{gst}] [GPU:: {gpu}] GFLOPS {gflops:.0f} Target GFLOPS: {target:.0f} met: {met}")
    iet = "iet-stress-750W-true"
    result(f"Action name :{iet}")
    result("Module name :iet")
    for gpu in _gpu_ids(hardware):
        result(f"[{iet}] [GPU:: {gpu}] Power(W) {_normal(rng, hardware.iet_power_w):.6f}")
    for gpu in _gpu_ids(hardware):
        result(f"[{iet}] [GPU:: {gpu}] pass: TRUE")
    return "\n".join(lines) + "\n"


def _transferbench(hardware: AmdHardware, faulty_gpu: int | None, rng: random.Random) -> str:
    """TransferBench's `a2a` summary: a source × destination matrix in GB/s, totals and the footers."""
    n = hardware.gpus
    cells = [[0.0] * n for _ in range(n)]
    for row in range(n):
        for column in range(n):
            if row != column:
                value = _normal(rng, hardware.a2a_link_gbps)
                if faulty_gpu is not None and faulty_gpu in (row, column):
                    value *= rng.uniform(0.36, 0.44)  # its xGMI links train at a lower width
                cells[row][column] = round(value, 3)
    header = "SRC\\DST " + " ".join(f"GPU {c:02d}" for c in range(n)) + " STotal Actual"
    lines = ["Summary:", "=" * 58, header]
    for row in range(n):
        values = [cells[row][c] for c in range(n) if c != row]
        text = " ".join("N/A" if c == row else f"{cells[row][c]:.3f}" for c in range(n))
        lines.append(f"GPU {row:02d} {text} {sum(values):.3f} {min(values) * (n - 1):.3f}")
    totals = [sum(cells[r][c] for r in range(n)) for c in range(n)]
    aggregate = sum(totals)
    lines.append("RTotal " + " ".join(f"{t:.3f}" for t in totals) + f" {aggregate:.3f}")
    links = [cells[r][c] for r in range(n) for c in range(n) if r != c]
    lines.append(f"Average bandwidth (GPU Timed): {sum(links) / len(links):.3f} GB/s")
    lines.append(f"Aggregate bandwidth (GPU Timed): {aggregate:.3f} GB/s")
    lines.append(f"Aggregate bandwidth (CPU Timed): {aggregate * 0.71:.3f} GB/s")
    return "\n".join(lines) + "\n"


def _rccl(peak: float, ranks: int, max_bytes: int, rng: random.Random) -> str:
    """An rccl-tests `all_reduce_perf` log (ROCm 6.4 layout: version lines, `#wrong` columns) whose bus bandwidth
    at the largest size is `peak`."""
    lines = [
        f"# nThread 1 nGpus 1 minBytes 1048576 maxBytes {max_bytes} step: 2(factor) warmup iters: 5 iters: 20 "
        "agg iters: 1 validation: 1 graph: 0",
        "#",
        "rccl-tests: Version develop:448c4c7",
        "RCCL version : 2.22.3-develop",
        "HIP version : 6.4.43484-123eb5128",
        "ROCm version : 6.4.2.0",
        "#",
        "#                                                              out-of-place                       in-place",
        "#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   "
        "busbw #wrong",
        "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)",
    ]
    factor = 2 * (ranks - 1) / ranks
    size = 1 << 20
    while size <= max_bytes:
        share = min(1.0, (size / max_bytes) ** 0.15)
        busbw = peak * share * rng.uniform(0.995, 1.0) if size < max_bytes else peak
        algbw = busbw / factor
        in_busbw = busbw * rng.uniform(0.995, 1.004)
        time_us = size / (algbw * 1e3)
        lines.append(
            f"{size:>12} {size // 4:>13}     float     sum      -1 {time_us:>8.1f} {algbw:>7.2f} {busbw:>7.2f} "
            f"     0 {time_us:>8.1f} {in_busbw / factor:>7.2f} {in_busbw:>7.2f}      0"
        )
        size *= 2
    lines += [
        "# Errors with asterisks indicate errors that have exceeded the maximum threshold.",
        "# Out of bounds values : 0 OK",
        f"# Avg bus bandwidth    : {peak * 0.4:.3f}",
        "#",
    ]
    return "\n".join(lines) + "\n"


def amd_smi_static(hardware: AmdHardware, serials: Sequence[str]) -> str:
    """`amd-smi static --json` (ROCm 7 layout, `gpu_data`), one entry per GPU with its board serial."""
    gpus = [
        {
            "gpu": index,
            "asic": {
                "market_name": hardware.market_name,
                "vendor_id": "0x1002",
                "device_id": "0x74a1",
                "asic_serial": f"0x{serial}",
                "num_compute_units": 304,
                "target_graphics_version": "gfx942",
            },
            "bus": {"bdf": bus, "max_pcie_width": 16, "pcie_interface_version": "Gen 5", "slot_type": "OAM"},
            "ifwi": {
                "name": hardware.market_name,
                "part_number": hardware.ifwi_part_number,
                "version": hardware.ifwi_version,
            },
            "driver": {"name": "amdgpu", "version": hardware.driver_version},
            "board": {
                "model_number": "102-G30211-00",
                "product_serial": serial,
                "product_name": hardware.board_name,
                "manufacturer_name": "AMD",
            },
        }
        for index, (bus, serial) in enumerate(zip(hardware.bus_ids, serials, strict=True))
    ]
    return json.dumps({"gpu_data": gpus}, indent=4) + "\n"


def amd_smi_metric(hardware: AmdHardware, *, uncorrectable: int, throttled: bool) -> str:
    """`amd-smi metric --json`'s ECC and power parts; GPU 0 carries `uncorrectable` errors and the throttle."""
    gpus = [
        {
            "gpu": index,
            "bdf": bus,
            "power": {
                "socket_power": {"value": 142, "unit": "W"},
                "throttle_status": "THROTTLED" if throttled and index == 0 else "UNTHROTTLED",
            },
            "ecc": {
                "total_correctable_count": 0,
                "total_uncorrectable_count": uncorrectable if index == 0 else 0,
                "total_deferred_count": 0,
            },
        }
        for index, bus in enumerate(hardware.bus_ids)
    ]
    return json.dumps({"gpu_data": gpus}, indent=4) + "\n"


def amdgpu_kernel_log(hostname: str, bus: str, kinds: set[str], moment: datetime) -> list[str]:
    """`journalctl -k -o short-iso-precise` lines of the window's amdgpu events for the health faults `kinds`."""
    stamp = moment.strftime("%Y-%m-%dT%H:%M:%S.%f+0000")
    prefix = f"{stamp} {hostname} kernel: amdgpu {bus}:"
    lines = []
    if "ecc" in kinds:
        lines.append(f"{prefix} amdgpu: 2 uncorrectable hardware errors detected in UMC block")
    if "reset" in kinds:
        lines += [
            f"{stamp} {hostname} kernel: [drm:amdgpu_job_timedout [amdgpu]] *ERROR* ring comp_1.0.0 timeout, "
            "signaled seq=1207, emitted seq=1209",
            f"{prefix} amdgpu: GPU reset begin!",
            f"{prefix} amdgpu: GPU reset(2) succeeded!",
        ]
    if kinds & {"ras", "xid"}:
        lines.append(f"{prefix} {{1}}uncorrectable hardware error(ERREVENT_ATHUB_INTERRUPT) detected!")
    return lines
