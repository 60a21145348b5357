"""`ibstat` → the host's InfiniBand (and RoCE) adapters: `{hcas: [{name, firmware_version, node_guid, ports:
[{port, state, rate_gbps}]}]}` in the order ibstat prints them.

ibstat (infiniband-diags) prints one `CA '<name>'` block per adapter with `Firmware version`, `Node GUID` and a
`Port N:` block per port (`State`, `Rate`); real outputs of MLNX_OFED 4.9/5.x on A100 and H100 hosts are in
`tests/agent/fixtures/ibstat_*.txt`. `Rate` is in Gb/s (`400`, or `400 Gb/sec (4X NDR)`; SDR prints `2.5`).
ibstat aborts through `ibpanic` when an adapter vanishes while it reads: that output is refused (`ParseError`)
even though the blocks before it look complete, because the adapter list is then not the host's.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from fleet_agent.parsers import ParseError

__all__ = ["parse_ibstat"]

_CA = re.compile(r"^CA '(?P<name>[^']+)'\s*$")
_PORT = re.compile(r"^Port (?P<port>\d+):\s*$")
_FIELD = re.compile(r"^(?P<key>[A-Za-z][A-Za-z ]*?):\s*(?P<value>.*)$")
_RATE = re.compile(r"^(?P<number>\d+(?:\.\d+)?)")
_MAX_CHARS = 4 * 1024 * 1024


def parse_ibstat(text: str, parameters: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The adapters and their ports (see the module docstring); `ParseError` for output that is not ibstat's."""
    if len(text) > _MAX_CHARS:
        raise ParseError(f"ibstat output is {len(text)} characters; at most {_MAX_CHARS} are read")
    hcas: list[dict[str, Any]] = []
    hca: dict[str, Any] | None = None
    port: dict[str, Any] | None = None
    for raw in text.splitlines():
        line = raw.strip()
        if not line:
            continue
        if line.startswith(("ibpanic:", "ibwarn:")):
            raise ParseError(f"ibstat failed: {line[:300]}")
        if (match := _CA.match(line)) is not None:
            hca = {"name": match.group("name"), "firmware_version": None, "node_guid": None, "ports": []}
            hcas.append(hca)
            port = None
            continue
        if hca is None:
            raise ParseError(f"ibstat printed something before the first CA block: {line[:200]!r}")
        if (match := _PORT.match(line)) is not None:
            port = {"port": int(match.group("port")), "state": None, "rate_gbps": None}
            hca["ports"].append(port)
            continue
        field = _FIELD.match(line)
        if field is None:
            raise ParseError(f"ibstat line not understood: {line[:200]!r}")
        key, value = field.group("key").strip().lower(), field.group("value").strip() or None
        if port is None:
            if key == "firmware version":
                hca["firmware_version"] = value
            elif key == "node guid":
                hca["node_guid"] = value.lower() if value else None
        elif key == "state":
            port["state"] = value
        elif key == "rate":
            port["rate_gbps"] = _rate(value)
    if not hcas:
        raise ParseError("ibstat listed no adapter (CA)")
    return {"hcas": hcas}


def _rate(value: str | None) -> int | float | None:
    match = _RATE.match(value or "")
    if match is None:
        return None
    number = float(match.group("number"))
    return int(number) if number.is_integer() else number
