"""nccl-tests stdout (`all_reduce_perf` and its siblings) → bandwidth metrics.

A result table has one row per message size: `size count type redop root` (releases before 2.10 print
no `root` column; the oldest print no `redop` either), then `time algbw busbw <check>` for the
out-of-place run and again for the in-place run. The `<check>` column changed meaning across releases:

- up to 2.11 (2017 – mid 2022) it is `error`, the largest deviation from the expected value, printed as
  a float (`0e+00`, `1e-06`); whether it was out of tolerance is only told by the
  `# Out of bounds values : N OK|FAILED` footer,
- from 2.13 it is `#wrong`, the count of wrong elements, printed with `%g`: a million or more wrong
  elements read as `1e+06`, `2.14748e+09`;
- `N/A` when validation is off (`-c 0`) or does not apply (alltoall in-place).

Lines that are not table rows (NCCL INFO logs) are skipped, as are the prefixes of `mpirun --tag-output`
(`[1,0]<stdout>:`) and `srun --label` (`0: `), so the raw output of a multi-node launch reads too.

A log may hold several tables (a health check that runs all_reduce, then sendrecv, ...). Each table is
named by the `# Collective test starting: <name>_perf` line (nccl-tests ≥ 2.17) or, failing that, by a
command line naming `<name>_perf` printed before it. The parser reads the tables of the collective it is
asked for (`collective`, default `all_reduce`); a log with several tables of which one is unnamed is
ambiguous and refused, because its busbw could belong to any collective.

Metrics:
- `busbw_gbps`: value = out-of-place bus bandwidth at the largest size (the lowest, if that size ran
  more than once); statistics min/max/mean over the out-of-place and in-place runs at that size,
- `avg_busbw_gbps`: the `# Avg bus bandwidth` footer (the lowest, over several runs; left out when absent),
- `wrong`: from `#wrong` tables the total over every row and both runs (`N/A` counts as 0); from `error`
  tables the `Out of bounds values` count (left out when that footer is missing: unknown, not zero),
- `max_error` (`error` tables only): the largest deviation printed.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from fleet_agent.parsers import Metrics, ParseError, summarise

__all__ = [
    "DEFAULT_COLLECTIVE",
    "ResultTable",
    "parse_all_reduce",
    "parse_all_reduce_rows",
    "parse_rccl",
    "parse_tables",
]

DEFAULT_COLLECTIVE = "all_reduce"

_PREFIX = re.compile(r"^(?:\[\d+,\d+\]<std(?:out|err)>:|\s*\d+:\s)")
_STARTING = re.compile(r"^#\s*Collective test starting:\s*(\S+)")
_THREADS = re.compile(r"^#\s*nThread\s+\d+")
_COLUMNS = re.compile(r"^#\s*size\s+count\s+type\b")
_AVG_BUSBW = re.compile(r"^#\s*Avg bus bandwidth\s*:\s*(\S+)")
_OUT_OF_BOUNDS = re.compile(r"^#\s*Out of bounds values\s*:\s*(\d+)\s*(OK|FAILED)?")
_COMMAND = re.compile(r"(?:^|[/\s=])([a-z][a-z0-9_]*?)_perf(?:_mpi)?\b")
_FAILURE = re.compile(r"\bTest (?:NCCL|RCCL|CUDA|HIP) failure\b")
_INTEGER = re.compile(r"^-?\d+$")
_ROW_SIZES = (11, 12, 13)


@dataclass
class ResultTable:
    """One run of one collective: its name (when the log tells it), check-column kind, rows and footers."""

    collective: str | None = None
    check: str | None = None  # "wrong" (count, ≥ 2.13) or "error" (max deviation, ≤ 2.11)
    rows: list[dict[str, Any]] = field(default_factory=list)
    out_of_bounds: int | None = None
    avg_busbw: float | None = None
    started: bool = False


def _collective_name(raw: str) -> str:
    name = raw.strip().rsplit("/", 1)[-1]
    for suffix in ("_mpi", "_perf"):
        name = name.removesuffix(suffix)
    return name


def parse_tables(text: str) -> list[ResultTable]:
    """Every result table of the log, in printed order; `ParseError` on a failed run or unreadable row."""
    tables: list[ResultTable] = []
    current = ResultTable()
    pending_name: str | None = None

    def begin(name: str | None) -> ResultTable:
        nonlocal current
        if current.rows or current.started:
            tables.append(current)
        current = ResultTable(collective=name, started=True)
        return current

    for raw in text.splitlines():
        line = _PREFIX.sub("", raw).strip()
        if not line:
            continue
        if _FAILURE.search(line):
            raise ParseError(f"nccl-tests reported a failure: {line[:300]}")
        if line.startswith("#"):
            starting = _STARTING.match(line)
            if starting:
                begin(_collective_name(starting.group(1)))
                pending_name = None
            elif _THREADS.match(line):
                if current.rows or (current.started and current.check is not None):
                    begin(pending_name)
                elif not current.started:
                    current.started, current.collective = True, pending_name
                elif current.collective is None:
                    current.collective = pending_name
                pending_name = None
            elif _COLUMNS.match(line):
                current.check = "wrong" if "#wrong" in line else "error" if re.search(r"\berror\b", line) else None
            elif match := _OUT_OF_BOUNDS.match(line):
                current.out_of_bounds = int(match.group(1))
            elif match := _AVG_BUSBW.match(line):
                current.avg_busbw = _footer_number(match.group(1))
            continue
        tokens = line.split()
        row = _row(tokens, current.check)
        if row is not None:
            current.rows.append(row)
            continue
        command = _COMMAND.search(line)
        if command and " INFO " not in line and " WARN " not in line:
            pending_name = _collective_name(command.group(1))
    if current.rows or current.started:
        tables.append(current)
    return [table for table in tables if table.rows]


def parse_all_reduce_rows(text: str, collective: str = DEFAULT_COLLECTIVE) -> list[dict[str, Any]]:
    """The per-size result rows of `collective`, in printed order; `ParseError` if none or ambiguous."""
    rows: list[dict[str, Any]] = []
    for table in _select(parse_tables(text), collective):
        rows.extend(table.rows)
    return rows


def parse_all_reduce(text: str, parameters: Mapping[str, Any] | None = None) -> Metrics:
    """Bus bandwidth at the largest message size, the footer average and the count of wrong results.

    `parameters["collective"]` names the collective to read when the log holds several (default all_reduce).
    """
    wanted = _collective_name(str((parameters or {}).get("collective") or DEFAULT_COLLECTIVE))
    tables = _select(parse_tables(text), wanted)
    rows = [row for table in tables for row in table.rows]
    largest = max(row["size_bytes"] for row in rows)
    at_largest = [row for row in rows if row["size_bytes"] == largest]
    busbw = [row[key] for row in at_largest for key in ("out_busbw_gbps", "in_busbw_gbps")]
    metrics: Metrics = {
        "busbw_gbps": {
            "value": min(row["out_busbw_gbps"] for row in at_largest),
            "unit": "GB/s",
            "statistics": summarise(busbw),
        },
    }
    wrong = _wrong(tables)
    if wrong is not None:
        metrics["wrong"] = {"value": wrong}
    errors = [row[key] for row in rows for key in ("out_error", "in_error") if row.get(key) is not None]
    if errors:
        metrics["max_error"] = {"value": max(errors)}
    averages = [table.avg_busbw for table in tables if table.avg_busbw is not None]
    if averages:
        metrics["avg_busbw_gbps"] = {"value": min(averages), "unit": "GB/s"}
    return metrics


def _select(tables: list[ResultTable], collective: str) -> list[ResultTable]:
    if not tables:
        raise ParseError("no nccl-tests result rows found (did the test start?)")
    if len(tables) == 1:
        only = tables[0]
        if only.collective not in (None, collective):
            raise ParseError(f"the log holds a {only.collective} table, not {collective}")
        return tables
    names = [table.collective or "unnamed" for table in tables]
    if any(table.collective is None for table in tables):
        raise ParseError(
            f"the log holds {len(tables)} result tables ({', '.join(names)}) and not every one names its "
            f"collective, so the {collective} table cannot be told apart; run one collective per test, or "
            "nccl-tests ≥ 2.17, which prints '# Collective test starting: <name>'"
        )
    chosen = [table for table in tables if table.collective == collective]
    if not chosen:
        raise ParseError(f"the log holds {', '.join(names)} tables but no {collective} table")
    return chosen


def _wrong(tables: list[ResultTable]) -> int | None:
    total = 0
    for table in tables:
        if table.check == "error" or any(row["out_error"] is not None for row in table.rows):
            if table.out_of_bounds is None:
                return None  # an old table without its footer: the count is unknown, not zero
            total += table.out_of_bounds
        else:
            total += sum((row["out_wrong"] or 0) + (row["in_wrong"] or 0) for row in table.rows)
    return total


def _row(tokens: list[str], check: str | None) -> dict[str, Any] | None:
    if len(tokens) not in _ROW_SIZES or not _INTEGER.match(tokens[0]) or not _INTEGER.match(tokens[1]):
        return None
    head, out_run, in_run = tokens[: len(tokens) - 8], tokens[-8:-4], tokens[-4:]
    try:
        return {
            "size_bytes": int(head[0]),
            "count": int(head[1]),
            "type": head[2],
            "redop": head[3] if len(head) > 3 else None,
            "root": int(head[4]) if len(head) > 4 else None,
            **_run("out", out_run, check),
            **_run("in", in_run, check),
        }
    except ValueError as exc:
        raise ParseError(f"unreadable nccl-tests row {' '.join(tokens)!r}: {exc}") from exc


def _run(prefix: str, tokens: list[str], check: str | None) -> dict[str, Any]:
    time_us, algbw, busbw, checked = tokens
    wrong, error = _check_cell(checked, check)
    return {
        f"{prefix}_time_us": _finite(time_us),
        f"{prefix}_algbw_gbps": _finite(algbw),
        f"{prefix}_busbw_gbps": _finite(busbw),
        f"{prefix}_wrong": wrong,
        f"{prefix}_error": error,
    }


def _check_cell(token: str, check: str | None) -> tuple[int | None, float | None]:
    """(wrong count, max error) of the check column; which one it is comes from the column header."""
    if token.upper() == "N/A":
        return None, None
    number = _finite(token)
    if check == "error" or (check is None and not _INTEGER.match(token)):
        return None, number
    if number < 0 or number != math.floor(number):
        raise ValueError(f"#wrong {token} is not a count")
    return int(number), None  # `%g` keeps six significant digits: 2.14748e+09 is 2147480000 or more


def _finite(token: str) -> float:
    number = float(token)
    if not math.isfinite(number):
        raise ValueError(f"{token} is not a finite number")
    return number


def _footer_number(token: str) -> float:
    try:
        return _finite(token)
    except ValueError as exc:
        raise ParseError(f"unreadable average bus bandwidth {token!r}") from exc


def parse_rccl(text: str, parameters: Mapping[str, Any] | None = None) -> Metrics:
    """rccl-tests (ROCm's fork of nccl-tests) → the same metrics as `parse_all_reduce`.

    RCCL's differences, as its real outputs show (tests/agent/fixtures/amd/): a `rccl-tests: Version …` line and,
    from ROCm 6.4, `RCCL version :`, `HIP version :`, `ROCm version :` lines before the table, none of them
    commented; `Test HIP failure` where nccl-tests says `Test CUDA failure`; the check column is always `#wrong`
    (a count), so a table without one is refused rather than read as a float deviation; and a table without its
    `# Avg bus bandwidth` footer is a cut log, refused rather than read at the largest size it reached."""
    metrics = parse_all_reduce(text, parameters)
    wanted = _collective_name(str((parameters or {}).get("collective") or DEFAULT_COLLECTIVE))
    tables = _select(parse_tables(text), wanted)
    if any(table.check != "wrong" for table in tables):
        raise ParseError("rccl-tests prints a #wrong column; this table has none (not rccl-tests output?)")
    if any(table.avg_busbw is None for table in tables):
        # every rccl-tests run ends with it: a log without it was cut (an ssh that dropped, a killed rank), and
        # its last row is not the largest size the run asked for
        raise ParseError("the rccl-tests log was cut before its footer ('# Avg bus bandwidth' is missing)")
    return metrics
