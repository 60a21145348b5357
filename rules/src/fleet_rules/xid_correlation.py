"""What a device's kernel-logged GPU events ask for, judged with their history and their job: the correlation rule.

NVIDIA's catalogue gives each code one step (`fleet_rules.xid_catalogue`). A code read alone misjudges two cases
the peers learned the hard way:

* **repeats**: a recoverable code that comes back on the same GPU is not the transient fault its first occurrence
  looked like. The same code on the same GPU `repeat_count` times within `repeat_window` escalates one step
  (restart_app → reset_gpu → reboot → repair). An informational code (`none`) stays informational.
  Source: NVSentinel's design for Xid 13/31 (docs/designs/014-workflow-XID-13-and-31.md: the last 24 h of the
  code on the same GPU, "found >=2 repeats" → a hardware suspect) and leptonai/gpud's reboot threshold
  (components/accelerator/nvidia/xid/threshold.go: 2 within the window before it asks for more).
* **bursts**: a code that many devices of one multi-node job logged at once is the workload's, not each device's:
  no device moves, and the execution is errored ("the workload crashed on N devices"). A burst is at least
  `burst_min_devices` devices and at least `burst_min_fraction` of the job's devices. Source: NVSentinel's
  report of one crashed job flagging 77 nodes across 11 GB300 racks (NVIDIA/NVSentinel pull 1629) and its Xid 31
  workflow (repeats on different GPUs → the application). A code whose step is `repair` (a person must act:
  "contact support", "check mechanicals") is never put on the workload.

Several log lines of one fault (the driver often logs three for one Xid 13) are one occurrence: lines of the
same code on the same GPU less than `same_occurrence_within` apart count once; lines without a time count once
together (they cannot be told apart). Every judgement says why in words, never in the logged text (text from a
machine under test is hostile): "Xid 95 (Uncontained memory error) on GPU 0000:3b:00: GPU reset asked; 2nd in
24 h: reboot". Pure: no Django.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from fleet_rules.amdgpu import is_fatal_amdgpu
from fleet_rules.health_evidence import XidEvent
from fleet_rules.vocabulary import XidResolution
from fleet_rules.xid import XidKind
from fleet_rules.xid_catalogue import catalogue_entry

__all__ = [
    "DEFAULT_THRESHOLDS",
    "STEP_WORDS",
    "EventJudgement",
    "JobBurst",
    "Thresholds",
    "XidJudgement",
    "escalated",
    "job_burst",
    "event_step",
    "xid_judge",
]

R = XidResolution
#: The steps in order, weakest first (`XidResolution`'s own order).
LADDER: tuple[XidResolution, ...] = tuple(XidResolution)

STEP_WORDS: Mapping[XidResolution, str] = {
    R.NONE: "nothing asked",
    R.RESTART_APP: "application restart asked",
    R.RESET_GPU: "GPU reset asked",
    R.REBOOT: "reboot asked",
    R.REPAIR: "repair asked",
}


@dataclass(frozen=True, slots=True)
class Thresholds:
    """The correlation rule's thresholds (docs/remediation.md prints them with their sources)."""

    repeat_count: int = 2
    repeat_window: timedelta = timedelta(hours=24)
    same_occurrence_within: timedelta = timedelta(seconds=60)
    burst_min_devices: int = 3
    burst_min_fraction: float = 0.5


DEFAULT_THRESHOLDS = Thresholds()


@dataclass(frozen=True, slots=True)
class JobBurst:
    """What the other devices of the same multi-node job logged in their windows: how many devices the job held,
    and for each code (kind, code) how many of them logged it (this device included)."""

    devices: int
    logged_by: Mapping[tuple[XidKind, int], int]

    def is_burst(self, kind: XidKind, code: int, thresholds: Thresholds) -> bool:
        n = self.logged_by.get((kind, code), 0)
        enough = n >= thresholds.burst_min_devices and n >= thresholds.burst_min_fraction * self.devices
        return self.devices > 1 and enough


def job_burst(windows: Iterable[Sequence[XidEvent]], devices: int) -> JobBurst:
    """The job's `JobBurst` from each of its devices' windows (a device counts once per code)."""
    logged_by: dict[tuple[XidKind, int], int] = defaultdict(int)
    for window in windows:
        for key in {(e.kind, e.code) for e in window}:
            logged_by[key] += 1
    return JobBurst(devices, dict(logged_by))


@dataclass(frozen=True, slots=True)
class EventJudgement:
    """One code on one GPU in this window: the step it asks for and why."""

    event: XidEvent  # the first line of it in the window
    step: XidResolution
    reason: str
    workload: bool = False  # put on the workload (a burst of the job)


@dataclass(frozen=True, slots=True)
class XidJudgement:
    """A device's window judged: the strongest step any of its events asks for (`none` when every event is the
    workload's or informational), each code's judgement, and the workload crash when there was one."""

    step: XidResolution
    events: tuple[EventJudgement, ...] = ()
    workload_devices: int = 0  # > 0: a burst put on the workload; the execution is errored with `workload_reason`
    workload_codes: tuple[str, ...] = field(default=())

    @property
    def deciding(self) -> EventJudgement | None:
        """The event whose step is the device's (the first of the strongest)."""
        mine = [e for e in self.events if not e.workload and e.step is self.step]
        return mine[0] if mine else None

    @property
    def reason(self) -> str:
        """Every code's judgement, strongest first, in one sentence per code."""
        ordered = sorted(self.events, key=lambda e: -LADDER.index(e.step))
        return "; ".join(e.reason for e in ordered)

    @property
    def workload_reason(self) -> str:
        if not self.workload_devices:
            return ""
        return f"the workload crashed on {self.workload_devices} devices ({', '.join(self.workload_codes)})"


def event_step(event: XidEvent) -> XidResolution:
    """The step the catalogue asks for one event, alone. amdgpu events keep their own table: fatal → repair."""
    if event.kind is XidKind.AMDGPU:
        return R.REPAIR if is_fatal_amdgpu(event.code) else R.NONE
    entry = catalogue_entry(sxid=event.kind is XidKind.SXID, code=event.code)
    return entry.resolution if entry is not None else R.NONE


def escalated(step: XidResolution) -> XidResolution:
    """One step up the ladder; `none` stays `none` and `repair` is the top."""
    if step is R.NONE:
        return step
    return LADDER[min(LADDER.index(step) + 1, len(LADDER) - 1)]


def _ordinal(n: int) -> str:
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


def _hours(span: timedelta) -> str:
    hours = span.total_seconds() / 3600
    return f"{hours:g} h"


def _occurrences(times: Sequence[datetime | None], within: timedelta) -> int:
    """Lines of one code on one GPU, as occurrences: lines less than `within` apart are one; untimed lines one."""
    timed = sorted(t for t in times if t is not None)
    count = 1 if any(t is None for t in times) else 0
    last: datetime | None = None
    for moment in timed:
        if last is None or moment - last >= within:
            count += 1
        last = moment
    return count


def _label(event: XidEvent) -> str:
    said = event.label if event.kind is not XidKind.AMDGPU else f"amdgpu event {event.code}"
    entry = (
        catalogue_entry(sxid=event.kind is XidKind.SXID, code=event.code) if event.kind is not XidKind.AMDGPU else None
    )
    meaning = entry.meaning if entry is not None else event.meaning
    if meaning:
        said += f" ({meaning})"
    if event.pci_bus_id:
        said += f" on GPU {event.pci_bus_id}"
    return said


def xid_judge(
    *,
    window: Sequence[XidEvent],
    history: Sequence[Sequence[XidEvent]] = (),
    now: datetime | None = None,
    job: JobBurst | None = None,
    thresholds: Thresholds = DEFAULT_THRESHOLDS,
) -> XidJudgement:
    """Judge one device's window: `window` is its events from this burn-in window, `history` the events of each of
    its earlier windows (with `now`, events older than `repeat_window` before it are not counted; without, the
    caller chose the windows; lines of one fault are one occurrence within a window, each window its own), `job`
    what the other devices of its multi-node job logged (None for a single-node job)."""
    groups: dict[tuple[XidKind, int, str | None], list[XidEvent]] = defaultdict(list)
    for event in window:
        groups[(event.kind, event.code, event.pci_bus_id)].append(event)
    since = now - thresholds.repeat_window if now is not None else None  # None: the caller windowed the history

    judged: list[EventJudgement] = []
    burst_codes: dict[str, int] = {}
    for (kind, code, gpu), lines in groups.items():
        first = lines[0]
        asked = event_step(first)
        said = f"{_label(first)}: {STEP_WORDS[asked]}"
        if job is not None and asked is not R.REPAIR and job.is_burst(kind, code, thresholds):
            devices = job.logged_by[(kind, code)]
            burst_codes[first.label] = devices
            said += f"; logged by {devices} of the job's {job.devices} devices at once: the workload's, nothing asked"
            judged.append(EventJudgement(first, R.NONE, said, workload=True))
            continue
        seen = _occurrences([e.at for e in lines], thresholds.same_occurrence_within)
        for earlier_window in history:
            earlier = [
                e.at
                for e in earlier_window
                if (e.kind, e.code, e.pci_bus_id) == (kind, code, gpu)
                and (since is None or e.at is None or e.at >= since)
            ]
            seen += _occurrences(earlier, thresholds.same_occurrence_within)
        step = asked
        if asked is not R.NONE and seen >= thresholds.repeat_count:
            step = escalated(asked)
            said += f"; {_ordinal(seen)} in {_hours(thresholds.repeat_window)}: {step.value.replace('_', ' ')}"
        judged.append(EventJudgement(first, step, said))

    mine = [j.step for j in judged if not j.workload]
    strongest = max(mine, key=LADDER.index) if mine else R.NONE
    workload_devices = max(burst_codes.values()) if burst_codes else 0
    return XidJudgement(strongest, tuple(judged), workload_devices, tuple(sorted(burst_codes)))
