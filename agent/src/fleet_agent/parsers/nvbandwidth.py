"""nvbandwidth text output → host/device copy bandwidth metrics.

Each testcase prints `Running <testcase>.`, a matrix titled like
`memcpy CE CPU(row) -> GPU(column) bandwidth (GB/s)` (a column header of GPU indices, then one row per
source), and `SUM <testcase> <total>` (from v0.2). The diagonal of a GPU(row)/GPU(column) matrix (a GPU
copying to itself) is not a measurement: v0.4 and later print `N/A` there, v0.1 printed `0.00`; it is
skipped whatever it holds.

nvbandwidth reports failures on stdout and may go on to the next testcase, so any error line fails the
whole parse, even after good matrices: `ERROR: …`, `ASSERT in expression …` and `NVML_ERROR: […]` (its
assertion macros), `[cudaErrorXxx]` / `[CUDA_ERROR_XXX]` (CUDA runtime and driver errors), `Invalid value
when checking the pattern` (a copy that delivered wrong data) and an abort.

Metrics (value = mean of the cells; statistics min/max/mean/sum; unit GB/s):
- `h2d_gbps` from `host_to_device_*`, `d2h_gbps` from `device_to_host_*`, `d2d_gbps` from
  `device_to_device_*`, pooling the cells of every matching testcase run (CE and SM copies alike).
Bidirectional testcases are left out on purpose: they measure one direction while the other direction
interferes, a different quantity from the unidirectional figure a threshold such as `d2d_gbps.min >= 335`
is written for. Latency testcases (ns, not GB/s) are left out too.
"""

from __future__ import annotations

import math
import re

from fleet_agent.parsers import Metrics, ParseError, summarise

__all__ = ["metric_for_testcase", "parse"]

_RUNNING = re.compile(r"^Running (\S+?)\.?$")
_ERROR = re.compile(
    r"CUDA_ERROR_\w+|\bcudaError\w*|^ERROR\b|\bASSERT in expression\b|\bNVML_ERROR\b"
    r"|Invalid value when checking the pattern|\bAborted\b.*core dumped|^terminate called\b"
)
_INTEGER = re.compile(r"^\d+$")
_PREFIXES = (
    ("host_to_device_", "h2d_gbps"),
    ("device_to_host_", "d2h_gbps"),
    ("device_to_device_", "d2d_gbps"),
)


def parse(text: str) -> Metrics:
    """Pool the bandwidth matrices of each direction and summarise them."""
    cells: dict[str, list[float]] = {}
    testcase: str | None = None
    lines = text.splitlines()
    index = 0
    while index < len(lines):
        line = lines[index].strip()
        index += 1
        running = _RUNNING.match(line)
        if running:
            testcase = running.group(1)
            continue
        if _ERROR.search(line):
            raise ParseError(f"nvbandwidth reported an error in {testcase or 'setup'}: {line[:300]}")
        if "(row)" in line and "(column)" in line:
            if testcase is None:
                raise ParseError(f"nvbandwidth matrix without a 'Running <testcase>.' line: {line!r}")
            matrix, index = _read_matrix(lines, index, testcase, skip_diagonal=line.count("GPU(") == 2)
            metric = metric_for_testcase(testcase) if "bandwidth (GB/s)" in line else None
            if metric is not None:
                cells.setdefault(metric, []).extend(matrix)
    metrics: Metrics = {}
    for metric, values in sorted(cells.items()):
        if values:
            statistics = summarise(values, with_sum=True)
            metrics[metric] = {"value": statistics["mean"], "unit": "GB/s", "statistics": statistics}
    if not metrics:
        raise ParseError("no host_to_device, device_to_host or device_to_device bandwidth matrix in nvbandwidth output")
    return metrics


def metric_for_testcase(testcase: str) -> str | None:
    """The metric a testcase's cells count towards, or None for testcases this parser leaves out."""
    if "bidirectional" in testcase or "latency" in testcase:
        return None
    return next((metric for prefix, metric in _PREFIXES if testcase.startswith(prefix)), None)


def _read_matrix(lines: list[str], index: int, testcase: str, *, skip_diagonal: bool) -> tuple[list[float], int]:
    """The numeric cells of the matrix whose column header is at `index`, and the index after it."""
    header = lines[index].split() if index < len(lines) else []
    if not header or not all(_INTEGER.match(token) for token in header):
        raise ParseError(f"nvbandwidth {testcase}: expected a column header of GPU indices")
    index += 1
    cells: list[float] = []
    while index < len(lines):
        tokens = lines[index].split()
        if not tokens or not _INTEGER.match(tokens[0]):
            break
        if len(tokens) - 1 != len(header):
            raise ParseError(
                f"nvbandwidth {testcase}: row {tokens[0]} has {len(tokens) - 1} cells for {len(header)} columns"
            )
        for column, token in zip(header, tokens[1:], strict=True):
            if token.upper() == "N/A" or (skip_diagonal and column == tokens[0]):
                continue
            try:
                value = float(token)
            except ValueError as exc:
                raise ParseError(f"nvbandwidth {testcase}: unreadable cell {token!r}") from exc
            if not math.isfinite(value):
                raise ParseError(f"nvbandwidth {testcase}: non-finite cell {token!r}")
            cells.append(value)
        index += 1
    return cells, index
