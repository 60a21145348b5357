"""What a burn-in window's health evidence says: which of its kernel-logged Xid/SXid events condemn
the hardware (`fleet_rules.xid`), the sentence that sends a device to repair for them, the ECC
counters before and after the job with their deltas, and the InfiniBand ports' error counters likewise.

The evidence is the `health` object of an execution report (docs/burn-in.md, "Health evidence"),
stored as the service validated it: times are ISO 8601 strings. Pure: no Django.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from fleet_rules.amdgpu import AMDGPU_EVENTS
from fleet_rules.vocabulary import ThrottleReason
from fleet_rules.xid import FATAL_SXID, FATAL_XID, XidKind, is_fatal

__all__ = [
    "PCI_BUS_ID_PATTERN",
    "EccRow",
    "FabricPortRow",
    "HealthRead",
    "XidEvent",
    "ecc_rows",
    "fabric_rows",
    "fatal_events",
    "fatal_reason",
    "health_read",
    "is_pci_bus_id",
    "xid_events",
]

#: How many events one report may carry, and how long each message may be: a window that logged
#: more is a device in trouble whatever the rest says, and the first thousand prove it.
MAX_EVENTS = 1000
#: At most this many member nodes' windows in a multi-node execution's `member_health`.
MAX_MEMBERS = 1024
MAX_MESSAGE = 1000
#: Xid codes are small (≤ ~200 today), SXid codes five digits; any code a 32-bit integer holds is
#: kept (an unknown code is evidence too, and refusing it would refuse the report's fatal ones).
MAX_CODE = 2**31 - 1
MAX_ECC_COUNTERS = 64
#: A PCI bus id as the drivers print it (`0000:3b:00`, `0000:05:00.0`): the kernel-log parser's and the
#: remediation's one spelling. An event's `pci_bus_id` is the machine's text, anything up to 64 characters;
#: only one of this shape may name a GPU in a remediation step, whose commands (`ssh {hostname} nvidia-smi -r
#: -i {gpu}`) hand their words to a shell on the node.
PCI_BUS_ID_PATTERN = r"[0-9a-fA-F]{4,8}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}(?:\.[0-7])?"


def is_pci_bus_id(text: str | None) -> bool:
    return text is not None and re.fullmatch(PCI_BUS_ID_PATTERN, text) is not None


#: How many InfiniBand ports one report's `health.fabric` may carry (a host has a handful; the agent sends the ports
#: whose counters grew first), and how many counters each side of a port.
MAX_FABRIC_PORTS = 64
MAX_FABRIC_COUNTERS = 16


@dataclass(frozen=True, slots=True)
class XidEvent:
    """One kernel-logged GPU event of a burn-in window (an NVIDIA Xid or SXid, an amdgpu event): as the
    agent's kernel-log parser read it, and as the service reads it back from the report."""

    kind: XidKind
    code: int
    pci_bus_id: str | None
    message: str
    at: datetime | None

    @property
    def fatal(self) -> bool:
        return is_fatal(self.kind, self.code)

    @property
    def meaning(self) -> str | None:
        """What the fatal table says the code means (None for a code it does not list)."""
        if self.kind is XidKind.AMDGPU:
            amdgpu = AMDGPU_EVENTS.get(self.code)
            return amdgpu.meaning if amdgpu is not None else None
        entry = (FATAL_XID if self.kind is XidKind.XID else FATAL_SXID).get(self.code)
        return entry.meaning if entry is not None else None

    @property
    def label(self) -> str:
        if self.kind is XidKind.AMDGPU:
            return "amdgpu event"
        return f"{'Xid' if self.kind is XidKind.XID else 'SXid'} {self.code}"

    def as_json(self) -> dict[str, Any]:
        """The wire form of an item of the execution report's `health.xid_events` (what the agent
        sends and `xid_events` reads back)."""
        return {
            "kind": self.kind.value,
            "code": self.code,
            "pci_bus_id": self.pci_bus_id,
            "message": self.message,
            "at": _iso(self.at.astimezone(UTC)) if self.at else None,
        }

    def sentence(self) -> str:
        """`Xid 79 (GPU has fallen off the bus) on 0000:3b:00 at 2026-12-03T14:02:11Z`: the table's
        words, never the logged message (text from a machine under test is not a reason)."""
        said = self.label
        if self.meaning:
            said += f" ({self.meaning})"
        if self.pci_bus_id:
            said += f" on {self.pci_bus_id}"
        if self.at is not None:
            said += f" at {_iso(self.at)}"
        return said


def _iso(moment: datetime) -> str:
    return moment.isoformat().replace("+00:00", "Z")


def _time(value: Any) -> datetime | None:
    if isinstance(value, datetime):
        return value
    if isinstance(value, str) and value:
        return datetime.fromisoformat(value.replace("Z", "+00:00"))
    return None


def xid_events(health: Mapping[str, Any] | None) -> list[XidEvent]:
    """The window's events in the order reported."""
    if not health:
        return []
    return [
        XidEvent(
            XidKind(e["kind"]),
            int(e["code"]),
            e.get("pci_bus_id") or None,
            e.get("message") or "",
            _time(e.get("at")),
        )
        for e in health.get("xid_events") or []
    ]


def fatal_events(health: Mapping[str, Any] | None) -> list[XidEvent]:
    """The events that condemn the hardware, earliest first (an event without a time last)."""
    fatal = [e for e in xid_events(health) if e.fatal]
    return sorted(fatal, key=lambda e: (e.at is None, e.at or datetime.min.replace(tzinfo=UTC)))


def fatal_reason(fatal: Sequence[XidEvent]) -> str:
    """The reason of the move to repair: the first fatal event in words, and how many more."""
    if not fatal:
        return ""
    more = len(fatal) - 1
    tail = f" (and {more} more fatal event{'s' if more != 1 else ''})" if more else ""
    return f"{fatal[0].sentence()} during its burn-in{tail}"


@dataclass(frozen=True, slots=True)
class EccRow:
    """One ECC or row-remap counter before and after the job; `delta` when both are numbers."""

    metric: str
    before: float | int | None
    after: float | int | None

    @property
    def delta(self) -> float | int | None:
        if isinstance(self.before, (int, float)) and isinstance(self.after, (int, float)):
            return self.after - self.before
        return None

    @property
    def grew(self) -> bool:
        delta = self.delta
        return delta is not None and delta > 0


def ecc_rows(health: Mapping[str, Any] | None) -> list[EccRow]:
    """Every counter read before or after the job, by name."""
    ecc = (health or {}).get("ecc") or {}
    before: Mapping[str, Any] = ecc.get("before") or {}
    after: Mapping[str, Any] = ecc.get("after") or {}
    return [EccRow(name, before.get(name), after.get(name)) for name in sorted(set(before) | set(after))]


@dataclass(frozen=True, slots=True)
class FabricPortRow:
    """One InfiniBand port's error counters before and after the job (`health.fabric.ports[]`)."""

    port: str  # `mlx5_0/1` (adapter/port), or `lid75/1` when read by perfquery
    state_before: str | None
    state_after: str | None
    counters: list[EccRow]
    saturated: list[str]  # counters at their maximum before the window: their growth is unknown
    reset: list[str]  # counters that went backwards during the window (reset): their growth is unknown

    @property
    def grew(self) -> list[EccRow]:
        return [row for row in self.counters if row.grew]

    @property
    def went_down(self) -> bool:
        return self.state_before == "ACTIVE" and self.state_after not in (None, "ACTIVE")


def fabric_rows(health: Mapping[str, Any] | None) -> list[FabricPortRow]:
    """Every port read before or after the job, in the order reported (those whose counters grew first)."""
    fabric = (health or {}).get("fabric") or {}
    rows = []
    for port in fabric.get("ports") or []:
        before: Mapping[str, Any] = port.get("before") or {}
        after: Mapping[str, Any] = port.get("after") or {}
        rows.append(
            FabricPortRow(
                str(port.get("port") or ""),
                port.get("state_before"),
                port.get("state_after"),
                [EccRow(name, before.get(name), after.get(name)) for name in sorted(set(before) | set(after))],
                list(port.get("saturated") or []),
                list(port.get("reset") or []),
            )
        )
    return rows


#: The throttle reasons in people's words.
THROTTLE_WORDS: Mapping[ThrottleReason, str] = {
    ThrottleReason.HW_SLOWDOWN: "hardware slowdown",
    ThrottleReason.HW_THERMAL_SLOWDOWN: "hardware thermal slowdown",
    ThrottleReason.HW_POWER_BRAKE_SLOWDOWN: "hardware power brake slowdown",
    ThrottleReason.SW_THERMAL_SLOWDOWN: "software thermal slowdown",
}


@dataclass(frozen=True, slots=True)
class HealthRead:
    """What a page shows of one execution's health evidence."""

    since: datetime | None
    until: datetime | None
    source: str
    events: list[XidEvent]
    ecc: list[EccRow]
    throttle_reasons: list[str]  # in words
    fabric: list[FabricPortRow] = field(default_factory=list)
    fabric_source: str = ""

    @property
    def fatal(self) -> list[XidEvent]:
        return [e for e in self.events if e.fatal]


def health_read(health: Mapping[str, Any] | None) -> HealthRead | None:
    """The stored evidence for a page (None when the execution has none)."""
    if health is None:
        return None
    window = health.get("window") or {}
    return HealthRead(
        _time(window.get("since")),
        _time(window.get("until")),
        str(health.get("source") or ""),
        xid_events(health),
        ecc_rows(health),
        [THROTTLE_WORDS.get(ThrottleReason(r), r) for r in health.get("throttle_reasons_seen") or []],
        fabric_rows(health),
        str((health.get("fabric") or {}).get("source") or ""),
    )
