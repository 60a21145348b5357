"""InfiniBand port error counters (the IBTA PortCounters a port's PMA keeps): what the health window reads before
and after a job, so that a link that went down or a cable that corrupts symbols during burn-in is seen.

Three ways in, one result — `{"source": "sysfs"|"perfquery", "ports": {"<device>/<port>": {"state", "counters",
"saturating"}}}`:

* `parse_ib_counters` reads the output of `grep -H . /sys/class/infiniband/*/ports/*/counters/<name> …
  /sys/class/infiniband/*/ports/*/state` run on the device (`<path>:<value>` lines; `state` reads `4: ACTIVE`),
* or of `perfquery` (infiniband-diags), one `# Port counters: Lid <lid> port <port>` block per port queried
  (`# Port extended counters: …` with `-x`), its fields `SymbolErrorCounter:.....0`, or in the OFED 1.x spelling
  `SymbolErrors:.....0`; a block is named `lid<lid>/<port>` (perfquery does not print the adapter's name),
* `read_ib_counters_directory` reads a local `/sys/class/infiniband` itself.

Real outputs of each are in `tests/agent/fixtures/ib_counters_*` (sources in SOURCES.md). Device and port names
come from the machine under test: a name that is not an adapter's (`mlx5_0`, `mlx5_bond_0`, `ibp24s0`) or a port
number is refused, never used as a path. Counters are kept as the PMA reports them; `saturating` says whether they
are the fixed-width PortCounters (sysfs and plain perfquery: 8 bits for `link_downed`, 16 for `symbol_error` and
`port_rcv_errors`), which stop at their maximum instead of wrapping — a counter at its maximum before a window
cannot show growth during it (`fleet_agent.fabric`).
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from fleet_agent.parsers import ParseError

__all__ = [
    "COUNTER_MAX",
    "IB_COUNTERS",
    "IB_DIRECTORY",
    "parse_ib_counters",
    "read_ib_counters_directory",
]

IB_DIRECTORY = Path("/sys/class/infiniband")
#: The error counters read, by their sysfs names (`/sys/class/infiniband/<dev>/ports/<n>/counters/<name>`).
IB_COUNTERS: tuple[str, ...] = (
    "link_downed",
    "symbol_error",
    "port_rcv_errors",
    "link_error_recovery",
    "local_link_integrity_errors",
    "port_rcv_remote_physical_errors",
    "excessive_buffer_overrun_errors",
    "port_xmit_discards",
)
#: Each PortCounters field's largest value (IBTA vol. 1, PortCounters: LinkDownedCounter and
#: LinkErrorRecoveryCounter 8 bits, LocalLinkIntegrityErrors and ExcessiveBufferOverrunErrors 4, the rest 16). The
#: counters stop there ("saturate") rather than wrap.
COUNTER_MAX: Mapping[str, int] = {
    "link_downed": 2**8 - 1,
    "symbol_error": 2**16 - 1,
    "port_rcv_errors": 2**16 - 1,
    "link_error_recovery": 2**8 - 1,
    "local_link_integrity_errors": 2**4 - 1,
    "port_rcv_remote_physical_errors": 2**16 - 1,
    "excessive_buffer_overrun_errors": 2**4 - 1,
    "port_xmit_discards": 2**16 - 1,
}
#: perfquery's field names (infiniband-diags today, and the OFED 1.x spelling) → the sysfs names.
_PERFQUERY_FIELDS: Mapping[str, str] = {
    "SymbolErrorCounter": "symbol_error",
    "SymbolErrors": "symbol_error",
    "LinkDownedCounter": "link_downed",
    "LinkDowned": "link_downed",
    "PortRcvErrors": "port_rcv_errors",
    "RcvErrors": "port_rcv_errors",
    "LinkErrorRecoveryCounter": "link_error_recovery",
    "LinkRecovers": "link_error_recovery",
    "LocalLinkIntegrityErrors": "local_link_integrity_errors",
    "LinkIntegrityErrors": "local_link_integrity_errors",
    "PortRcvRemotePhysicalErrors": "port_rcv_remote_physical_errors",
    "RcvRemotePhysErrors": "port_rcv_remote_physical_errors",
    "ExcessiveBufferOverrunErrors": "excessive_buffer_overrun_errors",
    "ExcBufOverrunErrors": "excessive_buffer_overrun_errors",
    "PortXmitDiscards": "port_xmit_discards",
    "XmtDiscards": "port_xmit_discards",
}

#: An adapter's name as the kernel names it (mlx5_0, mlx5_bond_0, ibp24s0, hfi1_0, irdma0): nothing else is read.
DEVICE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")  # fullmatch: `$` would let a newline end it
_PORT = re.compile(r"[0-9]{1,3}")
_MAX_CHARS = 4 * 1024 * 1024
#: At most this many ports are read (a host has a handful; a listing of thousands is not an adapter's).
MAX_PORTS = 256
#: A sysfs counter or state file holds a number or `4: ACTIVE`: reading more than this is reading something else.
_MAX_FILE_BYTES = 64
_MAX_VALUE = 2**64 - 1

_SYSFS_LINE = re.compile(
    r"^(?:[^:]*/)?(?P<device>[^/:]+)/ports/(?P<port>[^/:]+)/(?:counters/(?P<counter>[A-Za-z0-9_]+)|(?P<state>state))"
    r":(?P<value>.*)$"
)
_STATE = re.compile(r"^\s*[0-9]+:\s*(?P<word>[A-Z_]{1,20})\s*$")
_PERFQUERY_HEADER = re.compile(
    r"^# Port (?P<extended>extended )?counters: Lid (?P<lid>[0-9]{1,5}) "
    r"(?:port (?P<port>[0-9]{1,3})|(?P<all>all ports))"
)
_PERFQUERY_FIELD = re.compile(r"^(?P<name>[A-Za-z0-9]+):\.*(?P<value>\S*)\s*$")


def parse_ib_counters(text: str, parameters: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The ports' error counters from `grep -H .` over sysfs or from `perfquery` (see the module docstring);
    `ParseError` for output that is neither, or that names no port."""
    if len(text) > _MAX_CHARS:
        raise ParseError(f"the InfiniBand counters are {len(text)} characters; at most {_MAX_CHARS} are read")
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    for line in lines:
        if line.startswith(("ibwarn:", "ibpanic:", "ibwarn ", "perfquery: iberror")) or "iberror:" in line:
            raise ParseError(f"perfquery failed: {line[:300]}")
    if any(_PERFQUERY_HEADER.match(line) for line in lines):
        ports = _perfquery(lines)
        source = "perfquery"
    else:
        ports = _sysfs(lines)
        source = "sysfs"
    if not ports:
        raise ParseError("no InfiniBand port's counters were read (is /sys/class/infiniband there?)")
    return {"source": source, "ports": ports}


def _new_port(ports: dict[str, dict[str, Any]], name: str, *, saturating: bool) -> dict[str, Any]:
    if name not in ports and len(ports) >= MAX_PORTS:
        raise ParseError(f"more than {MAX_PORTS} InfiniBand ports listed")
    return ports.setdefault(name, {"state": None, "counters": {}, "saturating": saturating})


def _sysfs(lines: list[str]) -> dict[str, dict[str, Any]]:
    ports: dict[str, dict[str, Any]] = {}
    for line in lines:
        match = _SYSFS_LINE.match(line)
        if match is None:
            raise ParseError(f"InfiniBand counter line not understood: {line[:200]!r}")
        device, port = match.group("device"), match.group("port")
        if not DEVICE_NAME.fullmatch(device) or not _PORT.fullmatch(port):
            raise ParseError(f"not an InfiniBand device and port: {f'{device}/{port}'[:100]!r}")
        counter = match.group("counter")
        if counter is not None and counter not in IB_COUNTERS:
            continue  # a counter this window does not judge (port_xmit_data, …)
        entry = _new_port(ports, f"{device}/{int(port)}", saturating=True)
        if counter is None:
            entry["state"] = _state(match.group("value"))
        else:
            entry["counters"][counter] = _count(match.group("value"), f"{device}/{port} {counter}")
    return ports


def _perfquery(lines: list[str]) -> dict[str, dict[str, Any]]:
    ports: dict[str, dict[str, Any]] = {}
    entry: dict[str, Any] | None = None
    for line in lines:
        header = _PERFQUERY_HEADER.match(line)
        if header is not None:
            port = "all" if header.group("all") else str(int(header.group("port")))
            entry = _new_port(ports, f"lid{int(header.group('lid'))}/{port}", saturating=not header.group("extended"))
            continue
        field = _PERFQUERY_FIELD.match(line)
        if entry is None or field is None:
            raise ParseError(f"perfquery line not understood: {line[:200]!r}")
        counter = _PERFQUERY_FIELDS.get(field.group("name"))
        if counter is not None:
            entry["counters"][counter] = _count(field.group("value"), f"perfquery {field.group('name')}")
    return ports


def _count(raw: str, where: str) -> int:
    value = raw.strip()
    if not value.isdigit() or len(value) > 20 or int(value) > _MAX_VALUE:
        raise ParseError(f"{where}: not a counter value: {value[:40]!r}")
    return int(value)


def _state(raw: str) -> str:
    match = _STATE.match(raw)
    if match is None:
        raise ParseError(f"not a port state: {raw[:40]!r}")
    return match.group("word")


def read_ib_counters_directory(directory: Path = IB_DIRECTORY) -> dict[str, Any]:
    """The same result from a local sysfs: the adapters listed in `directory` whose names are adapters' names,
    their numbered ports, and each counter file read up to 64 bytes. `ParseError` when no port could be read."""
    ports: dict[str, dict[str, Any]] = {}
    for device in _listed(directory):
        if not DEVICE_NAME.fullmatch(device):
            continue  # a name that is not an adapter's is never made a path
        for port in _listed(directory / device / "ports"):
            if not _PORT.fullmatch(port):
                continue
            base = directory / device / "ports" / port
            entry = _new_port(ports, f"{device}/{int(port)}", saturating=True)
            state = _small_file(base / "state")
            entry["state"] = _state(state) if state is not None else None
            for counter in IB_COUNTERS:
                raw = _small_file(base / "counters" / counter)
                if raw is not None:
                    entry["counters"][counter] = _count(raw, f"{device}/{port} {counter}")
    if not ports:
        raise ParseError(f"no InfiniBand port's counters were read under {directory}")
    return {"source": "sysfs", "ports": ports}


def _listed(directory: Path) -> list[str]:
    try:
        with os.scandir(directory) as entries:
            return sorted(entry.name for entry in entries)
    except OSError:
        return []


def _small_file(path: Path) -> str | None:
    """The file's first bytes, or None when it cannot be read (absent, permission denied: a counter the kernel
    does not expose is missing, not zero)."""
    try:
        with path.open("rb") as handle:
            return handle.read(_MAX_FILE_BYTES).decode("ascii", errors="replace")
    except OSError:
        return None
