"""ROCm Validation Suite (`rvs -c <conf>`) → metrics with units, from the `[RESULT]` lines of its modules.

RVS rewrote its result lines between generations (real outputs of both in `tests/agent/fixtures/amd/`):

* up to ROCm 5.x/6.0 (RVS 0.x user guide, 2023): `[RESULT] [ts] action_1 gst 33367 Gflop: 6478.06 … pass: TRUE`,
  `[RESULT] [ts] action_1 iet 3254 pass: FALSE`, `[RESULT] [ts] pcie_act_1 peqt TRUE`;
* RVS 1.x (ROCm 6.x/7.x, MI300X/MI355X): the action in brackets and the GPU as `[GPU:: <id>]` (or
  `[GPU:: <index> - <id> - <bdf>]`): `… [gst-…] [GPU:: 42583] GFLOPS 1063560 Target GFLOPS: 0 met: TRUE`,
  `… [iet-…] [GPU:: 42583] Power(W) 1398.000000`, `… [iet-…] [GPU:: 42583] pass: TRUE`,
  `… pcie-bandwidth [ 1/16] [CPU:: 0] [GPU:: 2 - 42583 - 0000:05:00.0] h2d::true d2h::false 57.678 GBps …`,
  `… p2p-bandwidth[48/56] [GPU:: …] [GPU:: …] bidirectional: false 61.370 GBps …`, `… [pcie_act_1] peqt true`.

Metrics (each module's only when the log holds it; per GPU id in statistics):

| metric | from | unit |
|---|---|---|
| `gst_gflops` | GST: each GPU's final `GFLOPS … met:` / `Gflop:` result, value = the slowest GPU | GFLOPS |
| `gst_failed_gpus` | GST results with `met: FALSE` / `pass: FALSE` | |
| `iet_power_w` | IET power samples, value = the lowest GPU's highest sample (the weakest GPU under load) | W |
| `iet_failed_gpus` | IET `pass: FALSE` | |
| `pebb_h2d_gbps`, `pebb_d2h_gbps` | PEBB transfers, value = the slowest | GB/s |
| `pbqt_p2p_gbps` | PBQT (xGMI/PCIe peer) transfers, value = the slowest link | GB/s |
| `peqt_failed` | PEQT `false` results | |
| `rvs_failed` | every failed check above, summed | |

A log with no result line of a module it knows, or with an `[ERROR]` line, is a `ParseError`.
"""

from __future__ import annotations

import math
import re
import statistics as _stats
from collections.abc import Mapping
from typing import Any

from fleet_agent.parsers import Metrics, ParseError

__all__ = ["parse_rvs"]

_MAX_CHARS = 64 * 1024 * 1024
_RESULT = re.compile(r"^\[RESULT\s*\]\s*\[\s*[\d.]+\s*\]\s*(?P<rest>.*)$")
_ERROR = re.compile(r"^\[ERROR\s*\]\s*\[\s*[\d.]+\s*\]\s*(?P<rest>.*)$")
_GPU = r"\[GPU::\s*(?:\d+\s*-\s*)?(?P<gpu>\d+)(?:\s*-\s*[0-9a-fA-F:.]+)?\s*\]"
_GST_NEW = re.compile(rf"^\[[^\]]+\]\s*{_GPU}\s*GFLOPS\s+(?P<gflops>[\d.]+)\s+Target GFLOPS:.*met:\s*(?P<ok>\w+)")
_GST_OLD = re.compile(r"^\[?[\w.-]+\]?\s+gst\s+(?P<gpu>\d+)\s+Gflop:\s*(?P<gflops>[\d.]+).*pass:\s*(?P<ok>\w+)")
_IET_POWER = re.compile(rf"^\[[^\]]+\]\s*{_GPU}\s*Power\(W\)\s+(?P<watts>[\d.]+)")
_IET_PASS_NEW = re.compile(rf"^\[(?P<action>[^\]]*iet[^\]]*)\]\s*{_GPU}\s*pass:\s*(?P<ok>\w+)", re.IGNORECASE)
_IET_PASS_OLD = re.compile(r"^\[?[\w.-]+\]?\s+iet\s+(?P<gpu>\d+)\s+pass:\s*(?P<ok>\w+)")
_PEBB = re.compile(rf"pcie-bandwidth\s*\[\s*\d+/\d+\]\s*\[CPU::\s*\d+\]\s*{_GPU}\s*"
                   r"h2d::(?P<h2d>\w+)\s+d2h::(?P<d2h>\w+)\s+(?P<gbps>[\d.]+)\s*GBps")  # fmt: skip
_PBQT = re.compile(rf"p2p-bandwidth\s*\[\s*\d+/\d+\]\s*{_GPU}\s*\[GPU::[^\]]*\]\s*bidirectional:\s*\w+\s+"
                   r"(?P<gbps>[\d.]+)\s*GBps")  # fmt: skip
_PEQT = re.compile(r"\bpeqt\s+(?P<ok>true|false)\s*$", re.IGNORECASE)


def parse_rvs(text: str, parameters: Mapping[str, Any] | None = None) -> Metrics:
    if len(text) > _MAX_CHARS:
        raise ParseError(f"rvs output is {len(text)} characters; at most {_MAX_CHARS} are read")
    gst: dict[str, float] = {}
    gst_failed = iet_failed = peqt_failed = 0
    iet_power: dict[str, float] = {}
    h2d: list[float] = []
    d2h: list[float] = []
    p2p: dict[str, float] = {}
    seen = False
    for raw in text.splitlines():
        line = raw.strip()
        error = _ERROR.match(line)
        if error:
            raise ParseError(f"rvs reported an error: {error.group('rest')[:300]}")
        result = _RESULT.match(line)
        if result is None:
            continue
        rest = result.group("rest")
        if match := _GST_NEW.match(rest) or _GST_OLD.match(rest):
            gst[match.group("gpu")] = _number(match.group("gflops"), line)
            gst_failed += _failed(match.group("ok"))
        elif match := _IET_POWER.match(rest):
            gpu = match.group("gpu")
            iet_power[gpu] = max(iet_power.get(gpu, 0.0), _number(match.group("watts"), line))
        elif match := _IET_PASS_NEW.match(rest) or _IET_PASS_OLD.match(rest):
            iet_failed += _failed(match.group("ok"))
            iet_power.setdefault(match.group("gpu"), math.nan)
        elif match := _PEBB.search(rest):
            bandwidth = _number(match.group("gbps"), line)
            (h2d if match.group("h2d").lower() == "true" else d2h).append(bandwidth)
        elif match := _PBQT.search(rest):
            gpu = match.group("gpu")
            bandwidth = _number(match.group("gbps"), line)
            p2p[gpu] = min(p2p.get(gpu, bandwidth), bandwidth)
        elif match := _PEQT.search(rest):
            peqt_failed += _failed(match.group("ok"))
        else:
            continue
        seen = True
    if not seen:
        raise ParseError("no rvs result line of a module this parser reads (gst, iet, pebb, pbqt, peqt)")
    metrics: Metrics = {}
    if gst:
        metrics["gst_gflops"] = _per_gpu(gst, "GFLOPS", lowest=True)
        metrics["gst_failed_gpus"] = {"value": gst_failed}
    if iet_power:
        powers = {gpu: watts for gpu, watts in iet_power.items() if not math.isnan(watts)}
        metrics["iet_failed_gpus"] = {"value": iet_failed}
        if powers:
            metrics["iet_power_w"] = _per_gpu(powers, "W", lowest=True)
    for name, values in (("pebb_h2d_gbps", h2d), ("pebb_d2h_gbps", d2h)):
        if values:
            metrics[name] = {"value": min(values), "unit": "GB/s", "statistics": _summary(values)}
    if p2p:
        metrics["pbqt_p2p_gbps"] = _per_gpu(p2p, "GB/s", lowest=True)
    if _PEQT_SEEN(text):
        metrics["peqt_failed"] = {"value": peqt_failed}
    metrics["rvs_failed"] = {"value": gst_failed + iet_failed + peqt_failed}
    return metrics


def _PEQT_SEEN(text: str) -> bool:
    return any(_PEQT.search(line) for line in text.splitlines() if "[RESULT" in line)


def _failed(word: str) -> int:
    value = word.strip().upper()
    if value == "TRUE":
        return 0
    if value == "FALSE":
        return 1
    raise ParseError(f"rvs result {word!r} is neither TRUE nor FALSE")


def _per_gpu(values: Mapping[str, float], unit: str, *, lowest: bool) -> dict[str, Any]:
    numbers = list(values.values())
    return {
        "value": min(numbers) if lowest else max(numbers),
        "unit": unit,
        "statistics": {**_summary(numbers), **{f"gpu{gpu}": value for gpu, value in sorted(values.items())}},
    }


def _summary(values: list[float]) -> dict[str, float]:
    return {"min": min(values), "max": max(values), "mean": round(_stats.fmean(values), 3)}


def _number(token: str, line: str) -> float:
    try:
        number = float(token)
    except ValueError as exc:
        raise ParseError(f"unreadable rvs value {token!r} in {line[:200]!r}") from exc
    if not math.isfinite(number):
        raise ParseError(f"rvs value {token!r} is not finite")
    return number
