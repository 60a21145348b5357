"""Kernel log (`journalctl -k`, `dmesg`) → the NVIDIA driver's Xid events and the NVSwitch driver's SXid events.

The driver has written the same event in several shapes over the years (real lines of each are in
`tests/agent/fixtures/kernel_log_*.log`):

    NVRM: Xid (0000:03:00): 13, 0003 00000000 00008297 …                              (R2xx–R3xx: no "PCI:")
    NVRM: Xid (PCI:0000:9b:00): 119, pid=2024380, name=nvidia-smi, Timeout after 6s …   (R4xx/R5xx: pid, name)
    NVRM: Xid (PCI:0000:38:00): 13, pid='<unknown>', name=<unknown>, Graphics SM …      (no process to blame)
    NVRM: Xid (PCI:0000:02:00): 120, GSP task exception: …                             (GSP crash reports)
    NVRM: Xid (PCI:0000:3b:00 GPU-I:05): 94, …                                          (MIG: the instance)
    nvidia-nvswitch0: SXid (PCI:0000:05:00.0): 20034, Fatal, Link 63 LTSSM Fault Up

and each log tool puts its own prefix in front: `journalctl -o short-iso[-precise]`
(`2025-01-17T17:10:43+0000 host kernel: `), `dmesg --time-format iso` (`2025-01-21T04:41:44,283302+00:00 `,
with `--decode` also `kern  :warn  : `), classic syslog (`May 10 22:25:01 host kernel: [176830.774761] `),
`dmesg -T` (`[Sun Feb 23 16:24:18 2025] `) and raw `dmesg` (`[6781741.548768] `). An event's time is read only
from the ISO forms, which carry their offset; the others (no year, local time without a zone, seconds since boot)
give `at = None` rather than a guessed time.

An NVSwitch reports one error on several lines with the same SXid (the headline, then `Severity …` and
`Data {…}`): only the headline is an event. A line that names an Xid whose code cannot be read is a `ParseError`:
evidence that cannot be read is not evidence of health.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from fleet_agent.parsers import Metrics, ParseError
from fleet_rules.health_evidence import PCI_BUS_ID_PATTERN, XidEvent
from fleet_rules.xid import XidKind

__all__ = ["XidEvent", "parse_xid_events", "parse_xid_metrics"]

_MAX_CHARS = 64 * 1024 * 1024
_EVENT = re.compile(
    r"(?P<kind>NVRM: Xid|SXid) \((?:PCI:)?(?P<pci>" + PCI_BUS_ID_PATTERN + r"|[^)]*?)"
    r"(?: GPU-I:\d+)?\)\s*:?\s*(?P<rest>.*)$"
)
_CODE = re.compile(r"^(?P<code>\d+)\s*(?:,\s*(?P<message>.*))?$")
_PROCESS = re.compile(r"^(?:pid=(?:'[^']*'|\S+?),\s*)?(?:name=(?:'[^']*'|<[^>]*>|\S+?),\s*)?(?:channel\s+\S+,\s*)?")
_SXID_DETAIL = re.compile(r"^(?:Severity \d+ |Data \{)")
_ISO = re.compile(
    r"^(?:[a-z]+\s*:\s*[a-z]+\s*:\s*)?"  # dmesg --decode facility and level
    r"(?P<stamp>\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:[.,]\d+)?(?:Z|[+-]\d{2}:?\d{2}))"
)


def parse_xid_events(text: str, *, since: datetime | None = None, until: datetime | None = None) -> list[XidEvent]:
    """Every Xid/SXid event of the log, in log order. With `since`/`until`, events whose time is known and falls
    outside the window are left out (a `dmesg` fallback prints the whole ring buffer); events of unknown time are
    kept, because the log tool was asked for the window."""
    if len(text) > _MAX_CHARS:
        raise ParseError(f"the kernel log is {len(text)} characters; at most {_MAX_CHARS} are read")
    events: list[XidEvent] = []
    for line in text.splitlines():
        if "Xid" not in line:
            continue
        match = _EVENT.search(line)
        if match is None:
            continue
        kind = XidKind.XID if match.group("kind") == "NVRM: Xid" else XidKind.SXID
        body = _CODE.match(match.group("rest").strip())
        if body is None:
            where = line.strip()[:300]
            raise ParseError(f"a kernel log line names an {kind.value} whose code cannot be read: {where!r}")
        message = (body.group("message") or "").strip()
        if kind is XidKind.SXID and _SXID_DETAIL.match(message):
            continue
        if kind is XidKind.XID:
            message = _PROCESS.sub("", message, count=1).strip()
        at = _timestamp(line)
        if at is not None and ((since is not None and at < since) or (until is not None and at > until)):
            continue
        pci = match.group("pci").strip() or None
        events.append(XidEvent(kind, int(body.group("code")), pci.lower() if pci else None, message[:1000], at))
    return events


def parse_xid_metrics(text: str, parameters: Mapping[str, Any] | None = None) -> Metrics:
    """`xid_count` and `xid_fatal_count` (fatal by `fleet_rules.xid`), and `sxid_count`/`sxid_fatal_count`, each
    with per-PCI-address counts in `statistics`. The run parameters `since`/`until` (ISO 8601) bound the window."""
    parameters = parameters or {}
    events = parse_xid_events(
        text, since=_parameter_time(parameters, "since"), until=_parameter_time(parameters, "until")
    )
    return xid_metrics(events)


def xid_metrics(events: list[XidEvent]) -> Metrics:
    """The metrics of a list of events (see `parse_xid_metrics`)."""
    metrics: Metrics = {}
    for kind, prefix in ((XidKind.XID, "xid"), (XidKind.SXID, "sxid")):
        of_kind = [event for event in events if event.kind is kind]
        for suffix, chosen in (("count", of_kind), ("fatal_count", [e for e in of_kind if e.fatal])):
            per_address: dict[str, float | None] = {}
            for event in chosen:
                address = event.pci_bus_id or "unknown"
                per_address[address] = (per_address.get(address) or 0) + 1
            metrics[f"{prefix}_{suffix}"] = {"value": len(chosen), "statistics": per_address}
    return metrics


def _timestamp(line: str) -> datetime | None:
    match = _ISO.match(line.strip())
    if match is None:
        return None
    stamp = match.group("stamp").replace(",", ".")
    if re.search(r"[+-]\d{4}$", stamp):
        stamp = f"{stamp[:-2]}:{stamp[-2:]}"
    try:
        return datetime.fromisoformat(stamp.replace("Z", "+00:00"))
    except ValueError:
        return None


def _parameter_time(parameters: Mapping[str, Any], name: str) -> datetime | None:
    raw = parameters.get(name)
    if raw is None:
        return None
    if isinstance(raw, datetime):
        return raw
    try:
        moment = datetime.fromisoformat(str(raw).replace("Z", "+00:00"))
    except ValueError as exc:
        raise ParseError(f"the window's {name} is not an ISO 8601 time: {raw!r}") from exc
    if moment.tzinfo is None:
        raise ParseError(f"the window's {name} has no time zone: {raw!r}")
    return moment
