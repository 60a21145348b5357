"""Which kernel-logged GPU errors (Xid) and NVSwitch errors (SXid) condemn the hardware at once.

An Xid is the NVIDIA driver's report of a GPU error in the kernel log (`NVRM: Xid (PCI:0000:3b:00): 79, …`).
Most are caused by the application (13, 31, 43) or are recoverable; the ones in `FATAL_XID` mean the GPU
or its memory is faulty whatever the workload, so a burn-in that logged one proves the device unfit even
when every test's numbers passed: the service moves such a device to `needs_repair` at once, through the
lifecycle service (the circuit breaker applies). The agent's `kernel-log-xid` parser counts them with the
same table (`xid_fatal_count`), so a requirement can also judge the count.

Each entry names its source. docs/agent.md ("Health evidence") prints the table.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from fleet_rules.vocabulary import Vocabulary

__all__ = ["FATAL_SXID", "FATAL_XID", "FatalEvent", "XidKind", "is_fatal"]

XID_CATALOGUE = "NVIDIA Xid catalogue, https://docs.nvidia.com/deploy/xid-errors/"


class XidKind(Vocabulary):
    """An Xid is logged by a GPU's driver; an SXid by an NVSwitch's."""

    XID = "xid"
    SXID = "sxid"


@dataclass(frozen=True, slots=True)
class FatalEvent:
    """Why an event code condemns the hardware, and where that judgement comes from."""

    meaning: str
    source: str


FATAL_XID: Mapping[int, FatalEvent] = {
    48: FatalEvent("double-bit ECC error (uncorrectable memory error)", XID_CATALOGUE),
    63: FatalEvent("ECC page retirement or row remapping recorded", XID_CATALOGUE),
    64: FatalEvent("ECC page retirement or row remapper failure", XID_CATALOGUE),
    74: FatalEvent("NVLink error", XID_CATALOGUE),
    79: FatalEvent("GPU has fallen off the bus", XID_CATALOGUE),
    92: FatalEvent("high single-bit ECC error rate", XID_CATALOGUE),
    94: FatalEvent("contained ECC error", XID_CATALOGUE),
    95: FatalEvent("uncontained ECC error", XID_CATALOGUE),
    119: FatalEvent("GSP RPC timeout", XID_CATALOGUE),
    120: FatalEvent("GSP error", XID_CATALOGUE),
}

FATAL_SXID: Mapping[int, FatalEvent] = {}


def is_fatal(kind: XidKind, code: int) -> bool:
    """True when an event of this kind and code moves the device to repair at once."""
    table = FATAL_XID if kind is XidKind.XID else FATAL_SXID
    return code in table
