"""Which amdgpu kernel-log events (RAS errors, GPU resets, ring timeouts) an AMD Instinct burn-in counts, and
which of them condemn the hardware at once, as a fatal Xid does for NVIDIA (`fleet_rules.xid`).

The amdgpu driver logs no numbered codes, so each kind of event gets a number of its own here (stable: it
travels on the wire as the event's `code`, kind `amdgpu`, and is stored in the evidence). The agent's
`kernel-log-amdgpu` parser recognises them by the driver's message text; the service moves a device whose
burn-in window logged a fatal one to `needs_repair` through the lifecycle service, exactly as for a fatal Xid.

Each entry names its source: the message text is the Linux amdgpu driver's (`drivers/gpu/drm/amd/amdgpu`); the
severity follows AMD's own node health tool, node-scraper (`nodescraper/plugins/inband/dmesg/dmesg_analyzer.py`,
amd/node-scraper at c393416: error priority for "RAS Uncorrectable Error", "GPU Reset", "GPU reset failed",
"RAS Poison Consumed", "Bad page threshold exceeded", "Fatal error during GPU init"; warning for "RAS Correctable
Error"), and for the fatal RAS interrupt the MI300X reports of ROCm issue 4021. docs/agent.md prints the table.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import IntEnum

__all__ = ["AMDGPU_EVENTS", "AmdgpuEvent", "AmdgpuEventKind", "is_fatal_amdgpu"]

KERNEL_SOURCE = "Linux amdgpu driver message"
NODE_SCRAPER = "AMD node-scraper dmesg analyzer (amd/node-scraper c393416): {rule}, error priority"
NODE_SCRAPER_WARNING = "AMD node-scraper dmesg analyzer (amd/node-scraper c393416): {rule}, warning priority"
ROCM_4021 = (
    "ROCm issue 4021 (MI300X, ROCm 6.2.3): the ATHUB RAS interrupt that precedes the GPU's reset "
    "(https://github.com/ROCm/legacy-rocm-build/issues/4021)"
)


class AmdgpuEventKind(IntEnum):
    """The kinds of amdgpu event the kernel-log parser reads; the number is the event's wire `code`."""

    UNCORRECTABLE_ECC = 1
    FATAL_RAS_INTERRUPT = 2
    POISON_CONSUMED = 3
    GPU_RESET = 4
    GPU_RESET_FAILED = 5
    BAD_PAGE_THRESHOLD = 6
    GPU_INIT_FAILED = 7
    RING_TIMEOUT = 20
    CORRECTABLE_ECC = 21
    DEFERRED_ECC = 22
    ACA_EVENT = 23


@dataclass(frozen=True, slots=True)
class AmdgpuEvent:
    """What one kind of amdgpu event means, whether it condemns the GPU, and where that judgement comes from."""

    meaning: str
    fatal: bool
    source: str


AMDGPU_EVENTS: Mapping[int, AmdgpuEvent] = {
    AmdgpuEventKind.UNCORRECTABLE_ECC: AmdgpuEvent(
        "uncorrectable hardware (ECC) error",
        True,
        f"{KERNEL_SOURCE} 'N uncorrectable hardware errors detected in <block> block' (amdgpu_ras.c); "
        + NODE_SCRAPER.format(rule="RAS Uncorrectable Error"),
    ),
    AmdgpuEventKind.FATAL_RAS_INTERRUPT: AmdgpuEvent(
        "fatal RAS interrupt (uncorrectable hardware error)",
        True,
        f"{KERNEL_SOURCE} 'uncorrectable hardware error(ERREVENT_ATHUB_INTERRUPT) detected!' (amdgpu_ras.c); "
        + ROCM_4021,
    ),
    AmdgpuEventKind.POISON_CONSUMED: AmdgpuEvent(
        "poisoned memory consumed (GPU reset kicked off)",
        True,
        f"{KERNEL_SOURCE} 'poison is consumed by client N, kick off gpu reset flow'; "
        + NODE_SCRAPER.format(rule="RAS Poison Consumed"),
    ),
    AmdgpuEventKind.GPU_RESET: AmdgpuEvent(
        "GPU reset",
        True,
        f"{KERNEL_SOURCE} 'GPU reset begin!' (amdgpu_device.c); " + NODE_SCRAPER.format(rule="GPU Reset"),
    ),
    AmdgpuEventKind.GPU_RESET_FAILED: AmdgpuEvent(
        "GPU reset failed",
        True,
        f"{KERNEL_SOURCE} 'GPU reset(N) failed', 'Mode2 reset failed'; "
        + NODE_SCRAPER.format(rule="GPU reset failed, Mode 2 Reset Failed"),
    ),
    AmdgpuEventKind.BAD_PAGE_THRESHOLD: AmdgpuEvent(
        "retired (bad) pages reached the threshold",
        True,
        f"{KERNEL_SOURCE} 'Saved bad pages N reaches threshold value'; "
        + NODE_SCRAPER.format(rule="Bad page threshold exceeded"),
    ),
    AmdgpuEventKind.GPU_INIT_FAILED: AmdgpuEvent(
        "fatal error during GPU init",
        True,
        f"{KERNEL_SOURCE} 'Fatal error during GPU init'; " + NODE_SCRAPER.format(rule="Fatal error during GPU init"),
    ),
    AmdgpuEventKind.RING_TIMEOUT: AmdgpuEvent(
        "ring timeout (a job on the GPU hung)",
        False,
        f"{KERNEL_SOURCE} 'ring <name> timeout, signaled seq=…' (amdgpu_job.c): counted; the GPU reset that "
        "follows an unrecovered one is what condemns the device",
    ),
    AmdgpuEventKind.CORRECTABLE_ECC: AmdgpuEvent(
        "correctable hardware (ECC) errors",
        False,
        f"{KERNEL_SOURCE} 'N correctable hardware errors detected in total in <block> block'; "
        + NODE_SCRAPER_WARNING.format(rule="RAS Correctable Error"),
    ),
    AmdgpuEventKind.DEFERRED_ECC: AmdgpuEvent(
        "deferred hardware (ECC) errors",
        False,
        f"{KERNEL_SOURCE} 'N deferred hardware errors detected in <block> block': counted",
    ),
    AmdgpuEventKind.ACA_EVENT: AmdgpuEvent(
        "Accelerator Check Architecture events logged",
        False,
        f"{KERNEL_SOURCE} '[Hardware Error]: Accelerator Check Architecture events logged': counted (its "
        "severity is in the bank registers; the RAS messages beside it say whether it was uncorrectable)",
    ),
}


def is_fatal_amdgpu(code: int) -> bool:
    """True when an amdgpu event of this code moves the device to repair at once."""
    entry = AMDGPU_EVENTS.get(code)
    return entry is not None and entry.fatal
