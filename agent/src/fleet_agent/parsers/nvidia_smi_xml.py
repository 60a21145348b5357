"""`nvidia-smi -q -x` (XML) → the device's GPU inventory, and its ECC, row-remap and throttle state.

The XML comes from the machine under test, so it is read as hostile: the standard library's expat parser with
every entity declaration refused (an internal DTD subset is how "billion laughs" and external-entity attacks
start; nvidia-smi never writes one, it only names its external DTD, which expat does not fetch). A document
that does not parse — truncated by a timeout, cut by a crashed ssh — is a `ParseError`, never an empty
inventory; so is a well-formed document without a single `<gpu>`.

The layout moved between driver generations, and both readers follow it (the fixtures in
`tests/agent/fixtures/nvidia_smi_q_x_*.xml` are real outputs of R470, R510, R535 and R590):

* ECC counters: up to R470 (and on pre-Ampere GPUs later) `single_bit` / `double_bit` with a `total`; R5xx
  `sram_uncorrectable` + `dram_uncorrectable`; from R570 the SRAM counter is split into
  `sram_uncorrectable_parity` + `sram_uncorrectable_secded` (reading only one would under-count).
* Retired pages (`retired_pages/double_bit_retirement/retired_count`, `pending_retirement`): pre-Ampere only;
  Ampere and later remap rows instead (`remapped_rows/remapped_row_pending`, `remapped_row_failure`, …), which
  is `N/A` on older GPUs and on MIG-enabled A100s.
* Throttle reasons: `clocks_throttle_reasons/clocks_throttle_reason_*` up to R530, `clocks_event_reasons/
  clocks_event_reason_*` after.
* The board part number is `board_part_number` from R5xx; before that `gpu_part_number` held the board's.

A counter a GPU does not keep (`N/A`, `[N/A]`, `Not Supported`) is missing, never zero: the health metric then
carries per-GPU statistics with a null for that GPU and no value, so a rule on it fails closed.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from collections.abc import Mapping, Sequence
from typing import Any
from xml.parsers import expat

from fleet_agent.parsers import Metrics, ParseError, per_gpu_counters

__all__ = [
    "HEALTH_METRICS",
    "THROTTLE_REASONS",
    "parse_health",
    "parse_inventory",
    "safe_xml_root",
    "throttle_reasons_active",
]

#: The throttle (clock event) reasons the health window reports, by the name nvidia-smi gives them.
THROTTLE_REASONS: tuple[str, ...] = (
    "hw_slowdown",
    "hw_thermal_slowdown",
    "hw_power_brake_slowdown",
    "sw_thermal_slowdown",
)

#: Metrics of `parse_health`, each summed over GPUs (a Yes/No flag counts the GPUs where it is Yes).
HEALTH_METRICS: tuple[str, ...] = (
    "ecc_uncorrected_volatile",
    "ecc_uncorrected_aggregate",
    "ecc_corrected_volatile",
    "ecc_corrected_aggregate",
    "retired_pages_dbe",
    "retired_pages_sbe",
    "retired_pages_pending",
    "row_remap_pending",
    "row_remap_failure",
    "row_remap_correctable",
    "row_remap_uncorrectable",
    *(f"{reason}_active" for reason in THROTTLE_REASONS),
)

_MAX_BYTES = 16 * 1024 * 1024
#: How deep elements may nest (the root counts one). A real `nvidia-smi -q -x` report nests about six
#: levels; past this the document is refused as the parser meets the element, before anything is built
#: (2 million levels, 14 MB, took 5–6 s to parse in full before it was judged).
MAX_XML_DEPTH = 256
_MISSING = frozenset({"", "n/a", "[n/a]", "not supported", "[not supported]", "unknown error", "none"})
_INTEGER = re.compile(r"^\s*(\d+)(?:\s*[a-zA-Z()]+)?\s*$")
_YES, _NO = frozenset({"yes"}), frozenset({"no"})
_ACTIVE, _NOT_ACTIVE = "active", "not active"


def safe_xml_root(text: str) -> ET.Element:
    """The root element of `nvidia-smi -q -x` output, read without expanding any entity; `ParseError` when the
    text is not a complete `nvidia_smi_log` document."""
    if not text.strip():
        raise ParseError("nvidia-smi printed nothing")
    if len(text) > _MAX_BYTES:
        raise ParseError(f"nvidia-smi output is {len(text)} characters; at most {_MAX_BYTES} are read")
    start = text.find("<")
    if start < 0:
        raise ParseError(f"nvidia-smi did not print XML: {_first_line(text)!r}")
    root = _parse_refusing_entities(text[start:])
    if root.tag != "nvidia_smi_log":
        raise ParseError(f"not nvidia-smi -q -x output: the root element is <{root.tag}>")
    return root


def parse_inventory(text: str) -> dict[str, Any]:
    """`{driver_version, cuda_version, gpus: [{uuid, serial, pci_bus_id, vbios_version, part_number,
    product_name}]}` in the order nvidia-smi lists the GPUs; a field a GPU does not report is None."""
    root = safe_xml_root(text)
    gpus = _gpus(root)
    return {
        "driver_version": _text(root.find("driver_version")),
        "cuda_version": _text(root.find("cuda_version")),
        "gpus": [
            {
                "uuid": _text(gpu.find("uuid")),
                "serial": _text(gpu.find("serial")),
                "pci_bus_id": _bus_id(gpu),
                "vbios_version": _text(gpu.find("vbios_version")),
                "part_number": _part_number(gpu),
                "product_name": _text(gpu.find("product_name")),
            }
            for gpu in gpus
        ],
    }


def parse_health(text: str, parameters: Mapping[str, Any] | None = None) -> Metrics:
    """ECC, retired-page, row-remap and throttle state summed over GPUs, per-GPU values in `statistics` keyed by
    PCI bus id (see the module docstring); `gpu_count` is the number of GPUs read."""
    root = safe_xml_root(text)
    gpus = _gpus(root)
    per_gpu: dict[str, dict[str, int | None]] = {name: {} for name in HEALTH_METRICS}
    for index, gpu in enumerate(gpus):
        bus = _bus_id(gpu) or f"gpu{index}"
        readings = _gpu_health(gpu)
        for name in HEALTH_METRICS:
            per_gpu[name][bus] = readings.get(name)
    return per_gpu_counters(per_gpu, len(gpus))


def throttle_reasons_active(metrics: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """The throttle reasons (`THROTTLE_REASONS`) active on at least one GPU of a `parse_health` result."""
    active = []
    for reason in THROTTLE_REASONS:
        statistics = metrics.get(f"{reason}_active", {}).get("statistics") or {}
        if any(value for value in statistics.values()):
            active.append(reason)
    return active


# --- reading one GPU ----------------------------------------------------------------------------


def _gpus(root: ET.Element) -> list[ET.Element]:
    gpus = root.findall("gpu")
    if not gpus:
        raise ParseError("nvidia-smi -q -x listed no <gpu>: the driver sees no GPU (or the output was cut)")
    return gpus


def _gpu_health(gpu: ET.Element) -> dict[str, int | None]:
    readings: dict[str, int | None] = {}
    ecc = gpu.find("ecc_errors")
    for scope in ("volatile", "aggregate"):
        counters = ecc.find(scope) if ecc is not None else None
        readings[f"ecc_uncorrected_{scope}"] = _ecc(counters, uncorrected=True)
        readings[f"ecc_corrected_{scope}"] = _ecc(counters, uncorrected=False)
    readings["retired_pages_dbe"] = _integer(gpu.find("retired_pages/double_bit_retirement/retired_count"))
    readings["retired_pages_sbe"] = _integer(gpu.find("retired_pages/multiple_single_bit_retirement/retired_count"))
    readings["retired_pages_pending"] = _any_flag(
        gpu.find("retired_pages/pending_retirement"), gpu.find("retired_pages/pending_blacklist")
    )
    readings["row_remap_pending"] = _flag(gpu.find("remapped_rows/remapped_row_pending"))
    readings["row_remap_failure"] = _flag(gpu.find("remapped_rows/remapped_row_failure"))
    readings["row_remap_correctable"] = _integer(gpu.find("remapped_rows/remapped_row_corr"))
    readings["row_remap_uncorrectable"] = _integer(gpu.find("remapped_rows/remapped_row_unc"))
    for reason in THROTTLE_REASONS:
        readings[f"{reason}_active"] = _throttle(gpu, reason)
    return readings


def _ecc(counters: ET.Element | None, *, uncorrected: bool) -> int | None:
    """One GPU's corrected or uncorrected ECC count in whichever layout its driver writes."""
    if counters is None:
        return None
    old = counters.find("double_bit/total" if uncorrected else "single_bit/total")
    if old is not None:
        return _integer(old)
    if not uncorrected:
        return _sum(counters, ("sram_correctable", "dram_correctable"))
    if counters.find("sram_uncorrectable_parity") is not None or counters.find("sram_uncorrectable_secded") is not None:
        return _sum(counters, ("sram_uncorrectable_parity", "sram_uncorrectable_secded", "dram_uncorrectable"))
    return _sum(counters, ("sram_uncorrectable", "dram_uncorrectable"))


def _sum(counters: ET.Element, names: Sequence[str]) -> int | None:
    values = [_integer(counters.find(name)) for name in names]
    if any(value is None for value in values):
        return None
    return sum(value for value in values if value is not None)


def _throttle(gpu: ET.Element, reason: str) -> int | None:
    for group, prefix in (
        ("clocks_event_reasons", "clocks_event_reason_"),
        ("clocks_throttle_reasons", "clocks_throttle_reason_"),
    ):
        element = gpu.find(f"{group}/{prefix}{reason}")
        if element is not None:
            value = (element.text or "").strip().lower()
            if value == _ACTIVE:
                return 1
            if value == _NOT_ACTIVE:
                return 0
            return None
    return None


def _bus_id(gpu: ET.Element) -> str | None:
    return _text(gpu.find("pci/pci_bus_id")) or _clean(gpu.get("id"))


def _part_number(gpu: ET.Element) -> str | None:
    board = gpu.find("board_part_number")
    if board is not None:
        return _text(board)
    return _text(gpu.find("gpu_part_number"))  # before R5xx this element held the board's part number


def _text(element: ET.Element | None) -> str | None:
    return _clean(element.text if element is not None else None)


def _clean(value: str | None) -> str | None:
    if value is None:
        return None
    value = value.strip()
    return None if value.lower() in _MISSING else value


def _integer(element: ET.Element | None) -> int | None:
    value = _text(element)
    if value is None:
        return None
    match = _INTEGER.match(value)
    return int(match.group(1)) if match else None


def _flag(element: ET.Element | None) -> int | None:
    value = (_text(element) or "").lower()
    if value in _YES:
        return 1
    if value in _NO:
        return 0
    return None


def _any_flag(*elements: ET.Element | None) -> int | None:
    flags = [_flag(element) for element in elements if element is not None]
    known = [flag for flag in flags if flag is not None]
    if not known:
        return None
    return max(known)


def _parse_refusing_entities(text: str) -> ET.Element:
    """expat feeding an ElementTree builder, with every entity declaration refused before it can be used, no
    external DTD or entity ever read (what defusedxml does, with the standard library only), and nesting past
    `MAX_XML_DEPTH` refused as it is met."""
    builder = ET.TreeBuilder()
    parser = expat.ParserCreate()
    parser.SetParamEntityParsing(expat.XML_PARAM_ENTITY_PARSING_NEVER)

    def refuse(*_: Any) -> Any:
        raise ParseError("nvidia-smi output declares an XML entity; it is refused, never expanded")

    depth = 0

    def start(tag: str, attributes: dict[str, str]) -> None:
        nonlocal depth
        depth += 1
        if depth > MAX_XML_DEPTH:
            raise ParseError(f"nvidia-smi XML nests deeper than {MAX_XML_DEPTH} levels (MAX_XML_DEPTH); refused")
        builder.start(tag, attributes)

    def end(tag: str) -> None:
        nonlocal depth
        depth -= 1
        builder.end(tag)

    parser.StartElementHandler = start
    parser.EndElementHandler = end
    parser.CharacterDataHandler = builder.data
    parser.EntityDeclHandler = refuse
    parser.UnparsedEntityDeclHandler = refuse
    parser.ExternalEntityRefHandler = refuse
    try:
        parser.Parse(text, True)
        return builder.close()
    except expat.ExpatError as exc:
        why = f"{expat.ErrorString(exc.code)}, line {exc.lineno}"
        raise ParseError(f"nvidia-smi XML is malformed or truncated ({why})") from exc
    except AssertionError as exc:  # TreeBuilder: unbalanced document
        raise ParseError("nvidia-smi XML is truncated") from exc


def _first_line(text: str) -> str:
    return next((line.strip() for line in text.splitlines() if line.strip()), "")[:200]
