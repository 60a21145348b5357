"""nccl-tests `all_reduce_perf` stdout → bandwidth metrics.

The table has one row per message size: `size count type redop root` (nccl-tests before 2.10 print no
`root` column), then `time algbw busbw #wrong` for the out-of-place run and again for the in-place run.
`#wrong` is `N/A` when validation is off (`-c 0`). Lines that are not table rows (NCCL INFO logs,
`mpirun --tag-output` prefixes such as `[1,0]<stdout>:`) are skipped, so the parser can read the raw
output of a multi-node launch too.

Metrics:
- `busbw_gbps`: value = out-of-place bus bandwidth at the largest size (the lowest, if that size ran more
  than once); statistics min/max/mean over the out-of-place and in-place runs at that size,
- `avg_busbw_gbps`: the `# Avg bus bandwidth` footer (left out when the footer is missing),
- `wrong`: total `#wrong` over every row and both runs (`N/A` counts as 0).
"""

from __future__ import annotations

import math
import re
from typing import Any

from fleet_agent.parsers import Metrics, ParseError, summarise

__all__ = ["parse_all_reduce", "parse_all_reduce_rows"]

_TAG_PREFIX = re.compile(r"^\[\d+,\d+\]<std(?:out|err)>:")
_AVG_BUSBW = re.compile(r"^#\s*Avg bus bandwidth\s*:\s*(\S+)")
_FAILURE = re.compile(r"\bTest (?:NCCL|CUDA) failure\b")
_INTEGER = re.compile(r"^\d+$")


def parse_all_reduce_rows(text: str) -> list[dict[str, Any]]:
    """The per-size result rows, in printed order; `ParseError` if the run failed or printed none."""
    rows: list[dict[str, Any]] = []
    for raw in text.splitlines():
        line = _TAG_PREFIX.sub("", raw).strip()
        if not line or line.startswith("#"):
            continue
        if _FAILURE.search(line):
            raise ParseError(f"all_reduce_perf reported a failure: {line[:300]}")
        row = _row(line.split())
        if row is not None:
            rows.append(row)
    if not rows:
        raise ParseError("no all_reduce_perf result rows found (did the test start?)")
    return rows


def parse_all_reduce(text: str) -> Metrics:
    """Bus bandwidth at the largest message size, the footer average and the count of wrong results."""
    rows = parse_all_reduce_rows(text)
    largest = max(row["size_bytes"] for row in rows)
    at_largest = [row for row in rows if row["size_bytes"] == largest]
    busbw = [row[key] for row in at_largest for key in ("out_busbw_gbps", "in_busbw_gbps")]
    metrics: Metrics = {
        "busbw_gbps": {
            "value": min(row["out_busbw_gbps"] for row in at_largest),
            "unit": "GB/s",
            "statistics": summarise(busbw),
        },
        "wrong": {"value": sum((row["out_wrong"] or 0) + (row["in_wrong"] or 0) for row in rows)},
    }
    average = _footer_average(text)
    if average is not None:
        metrics["avg_busbw_gbps"] = {"value": average, "unit": "GB/s"}
    return metrics


def _row(tokens: list[str]) -> dict[str, Any] | None:
    if len(tokens) not in (12, 13) or not _INTEGER.match(tokens[0]) or not _INTEGER.match(tokens[1]):
        return None
    has_root = len(tokens) == 13
    head, out_run, in_run = tokens[: len(tokens) - 8], tokens[-8:-4], tokens[-4:]
    try:
        return {
            "size_bytes": int(head[0]),
            "count": int(head[1]),
            "type": head[2],
            "redop": head[3],
            "root": int(head[4]) if has_root else None,
            **_run("out", out_run),
            **_run("in", in_run),
        }
    except ValueError as exc:
        raise ParseError(f"unreadable all_reduce_perf row {' '.join(tokens)!r}: {exc}") from exc


def _run(prefix: str, tokens: list[str]) -> dict[str, Any]:
    time_us, algbw, busbw, wrong = tokens
    return {
        f"{prefix}_time_us": _finite(time_us),
        f"{prefix}_algbw_gbps": _finite(algbw),
        f"{prefix}_busbw_gbps": _finite(busbw),
        f"{prefix}_wrong": None if wrong.upper() == "N/A" else int(wrong),
    }


def _finite(token: str) -> float:
    number = float(token)
    if not math.isfinite(number):
        raise ValueError(f"{token} is not a finite number")
    return number


def _footer_average(text: str) -> float | None:
    for raw in text.splitlines():
        match = _AVG_BUSBW.match(_TAG_PREFIX.sub("", raw).strip())
        if match:
            try:
                return float(match.group(1))
            except ValueError as exc:
                raise ParseError(f"unreadable average bus bandwidth {match.group(1)!r}") from exc
    return None
