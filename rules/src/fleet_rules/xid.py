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

from fleet_rules.amdgpu import is_fatal_amdgpu
from fleet_rules.vocabulary import Vocabulary

__all__ = ["FATAL_SXID", "FATAL_XID", "FatalEvent", "XidKind", "is_fatal"]

XID_CATALOGUE = "NVIDIA Xid catalogue, https://docs.nvidia.com/deploy/xid-errors/"
#: The catalogue's machine-readable sheet, as mirrored by leptonai/gpud (components/accelerator/nvidia/xid/
#: catalog_generated.go): each code's immediate resolution (RESET_GPU, RESTART_BM, …).
XID_CATALOGUE_SHEET = "NVIDIA Xid catalogue sheet (analyzing-xid-catalog), resolution {resolution}"
A100_MEMORY_ERRORS = (
    "NVIDIA A100 GPU memory error management, https://docs.nvidia.com/deploy/a100-gpu-mem-error-mgmt/ "
    "(Xid 48/63/64/94/95 and the DRAM/SRAM companions 171/172)"
)
FABRIC_MANAGER_GUIDE = (
    "NVIDIA Fabric Manager user guide, NVSwitch SXid errors, always fatal to the fabric "
    "(https://docs.nvidia.com/datacenter/tesla/fabric-manager-user-guide/), as catalogued by leptonai/gpud "
    "components/accelerator/nvidia/sxid/sxid.go"
)


class XidKind(Vocabulary):
    """An Xid is logged by an NVIDIA GPU's driver; an SXid by an NVSwitch's; an amdgpu event by AMD's driver."""

    XID = "xid"
    SXID = "sxid"
    AMDGPU = "amdgpu"  # the amdgpu driver's RAS, reset and ring events (fleet_rules.amdgpu)


@dataclass(frozen=True, slots=True)
class FatalEvent:
    """Why an event code condemns the hardware, and where that judgement comes from."""

    meaning: str
    source: str


def _sheet(resolution: str) -> str:
    return XID_CATALOGUE_SHEET.format(resolution=resolution)


#: Xids that condemn the GPU whatever the workload. The catalogue's immediate resolution is named where it is
#: stronger than a restart of the application; codes the catalogue only asks to watch (63, 92) are here because
#: a burn-in is the moment to refuse a GPU that remaps rows or floods single-bit errors (Azure's NHC fails any
#: pending remap; NVSentinel escalates repeated ones).
FATAL_XID: Mapping[int, FatalEvent] = {
    48: FatalEvent("double-bit ECC error (uncorrectable memory error)", A100_MEMORY_ERRORS),
    63: FatalEvent("ECC page retirement or row remapping recorded", A100_MEMORY_ERRORS),
    64: FatalEvent("ECC page retirement or row remapper failure", f"{A100_MEMORY_ERRORS}; {_sheet('RESET_GPU')}"),
    74: FatalEvent("NVLink error", f"{XID_CATALOGUE}; {_sheet('WORKFLOW_NVLINK_ERR')}"),
    79: FatalEvent("GPU has fallen off the bus", f"{XID_CATALOGUE}; {_sheet('RESTART_BM')}"),
    92: FatalEvent("high single-bit ECC error rate", XID_CATALOGUE),
    94: FatalEvent("contained ECC error", A100_MEMORY_ERRORS),
    95: FatalEvent("uncontained ECC error", f"{A100_MEMORY_ERRORS}; {_sheet('RESET_GPU')}"),
    119: FatalEvent("GSP RPC timeout", f"{XID_CATALOGUE}; {_sheet('RESET_GPU')}"),
    120: FatalEvent("GSP error", f"{XID_CATALOGUE}; {_sheet('RESET_GPU')}"),
    140: FatalEvent("ECC unrecovered error (an uncorrectable error escaped)", _sheet("RESET_GPU")),
    158: FatalEvent("GPU fatal timeout", _sheet("RESET_GPU")),
    171: FatalEvent("uncorrectable DRAM error (detail of an Xid 48)", A100_MEMORY_ERRORS),
    172: FatalEvent("uncorrectable SRAM error (detail of an Xid 48)", A100_MEMORY_ERRORS),
}

#: NVSwitch SXids the Fabric Manager guide calls always fatal to the fabric. Those fatal only to the port they
#: occur on (e.g. 20034, "LTSSM Fault Up": a link went down) are left out: the Xid the GPU logs with them (79, 74)
#: is what condemns the device.
FATAL_SXID: Mapping[int, FatalEvent] = {
    10003: FatalEvent("host unhandled interrupt", FABRIC_MANAGER_GUIDE),
    12020: FatalEvent("egress sequence ID error", FABRIC_MANAGER_GUIDE),
    22003: FatalEvent("Minion halt", FABRIC_MANAGER_GUIDE),
    22011: FatalEvent("Minion external error", FABRIC_MANAGER_GUIDE),
    **{
        code: FatalEvent(meaning, FABRIC_MANAGER_GUIDE)
        for code, meaning in (
            (23001, "ingress SRC-VC buffer overflow"),
            (23002, "ingress SRC-VC buffer underflow"),
            (23003, "egress DST-VC credit overflow"),
            (23004, "egress DST-VC credit underflow"),
            (23005, "ingress packet burst error"),
            (23006, "ingress packet sticky error"),
            (23007, "possible bubbles at ingress"),
            (23008, "ingress packet invalid destination error"),
            (23009, "ingress packet parity error"),
            (23010, "ingress SRC-VC buffer overflow"),
            (23011, "ingress SRC-VC buffer underflow"),
            (23012, "egress DST-VC credit overflow"),
            (23013, "egress DST-VC credit underflow"),
            (23014, "ingress packet burst error"),
            (23015, "ingress packet sticky error"),
            (23016, "possible bubbles at ingress"),
            (23017, "ingress credit parity error"),
        )
    },
}


def is_fatal(kind: XidKind, code: int) -> bool:
    """True when an event of this kind and code moves the device to repair at once."""
    if kind is XidKind.AMDGPU:
        return is_fatal_amdgpu(code)
    table = FATAL_XID if kind is XidKind.XID else FATAL_SXID
    return code in table
