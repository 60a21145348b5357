"""`amd-smi static --json` → the device's GPU inventory; `amd-smi metric --json` → its ECC and throttle state.

The JSON comes from the machine under test and is read as hostile: at most `_MAX_CHARS` characters, nesting at
most `_MAX_DEPTH` levels, every value typed before use. The layout moved between ROCm generations (see
`tests/agent/fixtures/amd/SOURCES.md`):

* ROCm 6.x prints a bare list, one object per GPU (`[{"gpu": 0, "asic": {…}, …}]`); ROCm 7.x (amd-smi 26.x) wraps
  it: `{"gpu_data": [{"gpu": 0, …}]}`.
* A value amd-smi could not read is `"N/A"` (or `{"value": "N/A", …}`), which reads as unknown, never as zero.
* The board serial is `board.product_serial`; older releases and consumer boards leave it `N/A`, and then the
  ASIC's serial (`asic.asic_serial`) identifies the GPU. The VBIOS is `vbios` (up to 6.x) or `ifwi` (7.x
  Instinct), each with `version` and `part_number`.

The inventory is the same object `nvidia-smi-xml-inventory` returns (`driver_version`, `cuda_version`, `gpus`),
so fingerprints, certificates and hardware-change supersession work unchanged: `cuda_version` carries the GPU
runtime's version, ROCm's here when the output names it (amd-smi's static JSON does not: it stays null).
A document that does not parse, or holds no GPU, or a GPU without its `asic` section, is a `ParseError` —
never an empty inventory.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from fleet_agent.parsers import Metrics, ParseError, per_gpu_counters

__all__ = ["AMD_HEALTH_METRICS", "parse_amd_health", "parse_amd_inventory", "read_gpus"]

_MAX_CHARS = 16 * 1024 * 1024
_MAX_DEPTH = 32
_MAX_GPUS = 64
_MISSING = frozenset({"", "n/a", "na", "none", "not supported", "unknown"})

#: Metrics of `parse_amd_health`, each summed over GPUs (per GPU in statistics, keyed by BDF).
AMD_HEALTH_METRICS: tuple[str, ...] = (
    "ecc_uncorrected",
    "ecc_corrected",
    "ecc_deferred",
    "throttle_active",
)


def read_gpus(text: str, tool: str = "amd-smi") -> list[Mapping[str, Any]]:
    """The per-GPU objects of an `amd-smi … --json` document in either generation's layout."""
    if not text.strip():
        raise ParseError(f"{tool} printed nothing")
    if len(text) > _MAX_CHARS:
        raise ParseError(f"{tool} output is {len(text)} characters; at most {_MAX_CHARS} are read")
    start = min((i for i in (text.find("["), text.find("{")) if i >= 0), default=-1)
    if start < 0:
        raise ParseError(f"{tool} did not print JSON: {_first_line(text)!r}")
    try:
        document = json.loads(text[start:])
    except (ValueError, RecursionError) as exc:
        raise ParseError(f"{tool} JSON is malformed or truncated ({exc})") from exc
    _check_depth(document, tool)
    gpus = document.get("gpu_data") if isinstance(document, dict) else document
    if not isinstance(gpus, list):
        raise ParseError(f"{tool} JSON holds neither a list of GPUs nor gpu_data")
    if not gpus:
        raise ParseError(f"{tool} listed no GPU: the driver sees none (or the output was cut)")
    if len(gpus) > _MAX_GPUS:
        raise ParseError(f"{tool} listed {len(gpus)} GPUs; at most {_MAX_GPUS} are read")
    for index, gpu in enumerate(gpus):
        if not isinstance(gpu, dict):
            raise ParseError(f"{tool} GPU entry {index} is not an object")
    return gpus


def parse_amd_inventory(text: str) -> dict[str, Any]:
    """`{driver_version, cuda_version, gpus: [{uuid, serial, pci_bus_id, vbios_version, part_number,
    product_name}]}` in amd-smi's GPU order; a field a GPU does not report is None."""
    gpus = read_gpus(text, "amd-smi static")
    listed = []
    drivers: set[str] = set()
    for index, gpu in enumerate(gpus):
        asic = gpu.get("asic")
        if not isinstance(asic, dict):
            raise ParseError(f"amd-smi static: GPU {index} has no asic section (run `amd-smi static --json`)")
        board = _section(gpu, "board")
        firmware = _section(gpu, "ifwi") or _section(gpu, "vbios")
        bus = _section(gpu, "bus")
        driver = _section(gpu, "driver")
        version = _version(driver.get("version"))
        if version is not None:
            drivers.add(version)
        listed.append(
            {
                "uuid": _text(gpu.get("uuid")),
                "serial": _serial(board.get("product_serial")) or _serial(asic.get("asic_serial")),
                "pci_bus_id": _text(bus.get("bdf")) or _text(gpu.get("bdf")),
                "vbios_version": _text(firmware.get("version")) or _text(firmware.get("name")),
                "part_number": _text(firmware.get("part_number")) or _text(board.get("model_number")),
                "product_name": _text(asic.get("market_name")) or _text(board.get("product_name")),
            }
        )
    return {
        "driver_version": ",".join(sorted(drivers)) if drivers else None,
        "cuda_version": None,
        "gpus": listed,
    }


def parse_amd_health(text: str, parameters: Mapping[str, Any] | None = None) -> Metrics:
    """ECC counts (uncorrected, corrected, deferred: `ecc.total_*_count`) and whether the GPU is throttled
    (`power.throttle_status`), summed over GPUs with per-GPU values in statistics keyed by BDF (else `gpu<N>`);
    `gpu_count`. A count a GPU does not keep (`N/A`) leaves the metric without a value (fail closed)."""
    gpus = read_gpus(text, "amd-smi metric")
    per_gpu: dict[str, dict[str, int | None]] = {name: {} for name in AMD_HEALTH_METRICS}
    for index, gpu in enumerate(gpus):
        key = _text(gpu.get("bdf")) or _text(_section(gpu, "bus").get("bdf")) or f"gpu{gpu.get('gpu', index)}"
        ecc = gpu.get("ecc")
        if ecc is not None and not isinstance(ecc, dict) and _text(ecc) is not None:
            raise ParseError(f"amd-smi metric: GPU {index} ecc section is not an object")
        ecc = ecc if isinstance(ecc, dict) else {}
        per_gpu["ecc_uncorrected"][key] = _count(ecc.get("total_uncorrectable_count"))
        per_gpu["ecc_corrected"][key] = _count(ecc.get("total_correctable_count"))
        per_gpu["ecc_deferred"][key] = _count(ecc.get("total_deferred_count"))
        per_gpu["throttle_active"][key] = _throttled(_section(gpu, "power").get("throttle_status"))
    return per_gpu_counters(per_gpu, len(gpus))


def _section(gpu: Mapping[str, Any], name: str) -> Mapping[str, Any]:
    value = gpu.get(name)
    return value if isinstance(value, dict) else {}


def _text(value: Any) -> str | None:
    if isinstance(value, dict) and "value" in value:
        value = value["value"]
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, int | float):
        return str(value)
    if not isinstance(value, str):
        return None
    cleaned = " ".join(value.split())[:256]
    return None if cleaned.lower() in _MISSING else cleaned


def _version(value: Any) -> str | None:
    """The driver's version; inbox drivers report the kernel's whole build string, cut to what the
    inventory keeps (64 characters)."""
    version = _text(value)
    return version[:64] if version is not None else None


def _serial(value: Any) -> str | None:
    serial = _text(value)
    return None if serial in ("0", "0x0", "0x0000000000000000") else serial


def _count(value: Any) -> int | None:
    if isinstance(value, dict) and "value" in value:
        value = value["value"]
    if isinstance(value, bool):
        return None
    if isinstance(value, int) and value >= 0:
        return value
    if isinstance(value, str) and value.strip().isdigit():
        return int(value.strip())
    return None


def _throttled(value: Any) -> int | None:
    text = _text(value)
    if text is None:
        return None
    if text.upper() == "UNTHROTTLED":
        return 0
    if text.upper() == "THROTTLED":
        return 1
    return None


def _check_depth(value: Any, tool: str, depth: int = 0) -> None:
    if depth > _MAX_DEPTH:
        raise ParseError(f"{tool} JSON is nested deeper than {_MAX_DEPTH} levels")
    if isinstance(value, dict):
        for item in value.values():
            _check_depth(item, tool, depth + 1)
    elif isinstance(value, list):
        for item in value:
            _check_depth(item, tool, depth + 1)


def _first_line(text: str) -> str:
    return next((line.strip() for line in text.splitlines() if line.strip()), "")[:200]
