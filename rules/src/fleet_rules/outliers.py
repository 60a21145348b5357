"""Fleet-relative outliers: devices that pass their thresholds but sit far out on the bad side of
their siblings (same site, resource class, requirement, metric and statistic).

The spread is the median absolute deviation (MAD), which a few bad devices cannot inflate the way
they inflate a standard deviation; a device's robust z-score is `0.6745 · (x − median) / MAD`
(0.6745 makes it comparable with an ordinary z-score for normal data). The threshold rule's
comparator says which side is bad: for `gt`/`gte` (a floor) low values are, for `lt`/`lte` (a
ceiling) high ones; `eq` has no worse side. Pure: the service loads the samples (or, for a large
fleet, each group's size, median and MAD with the samples that may be beyond `k`), this decides.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from statistics import median
from uuid import UUID

from fleet_rules.vocabulary import Comparator, OutlierGroupReason

#: The robust z-score beyond which a device is an outlier, unless its requirement says otherwise.
DEFAULT_K = 3.5
#: A group of fewer devices has no meaningful centre to be far from.
DEFAULT_MIN_GROUP = 8
#: Scales the MAD to a standard deviation for normally distributed values.
CONSISTENCY = 0.6745


@dataclass(frozen=True)
class Sample:
    """One device's measured value in a group (its latest passing evidence)."""

    device_id: UUID
    hostname: str
    value: float


@dataclass(frozen=True)
class Outlier:
    device_id: UUID
    hostname: str
    value: float
    robust_z: float


@dataclass(frozen=True)
class GroupVerdict:
    """What a group says: its centre and spread, its outliers (farthest first), and, when it names
    none, why."""

    size: int
    median: float | None
    mad: float | None
    outliers: tuple[Outlier, ...]
    reason: OutlierGroupReason | None


def bad_side(comparator: str) -> int:
    """−1 when low values are bad (a floor), +1 when high ones are (a ceiling), 0 for `eq`."""
    if comparator in (Comparator.GT, Comparator.GTE):
        return -1
    if comparator in (Comparator.LT, Comparator.LTE):
        return 1
    return 0


def mad(values: Sequence[float], centre: float) -> float:
    return float(median(abs(v - centre) for v in values))


def robust_z(value: float, centre: float, spread: float) -> float:
    return CONSISTENCY * (value - centre) / spread


def find_outliers(
    samples: Sequence[Sample],
    *,
    comparator: str,
    k: float = DEFAULT_K,
    min_group: int = DEFAULT_MIN_GROUP,
) -> GroupVerdict:
    """The group's outliers: devices whose robust z-score is beyond `k` on the bad side."""
    kept = [s for s in samples if math.isfinite(s.value)]
    values = [s.value for s in kept]
    centre = float(median(values)) if values else None
    spread = mad(values, centre) if centre is not None else None
    return judge_group(len(kept), centre, spread, kept, comparator=comparator, k=k, min_group=min_group)


def judge_group(
    size: int,
    centre: float | None,
    spread: float | None,
    candidates: Sequence[Sample],
    *,
    comparator: str,
    k: float = DEFAULT_K,
    min_group: int = DEFAULT_MIN_GROUP,
) -> GroupVerdict:
    """The verdict of a group of `size` finite values with median `centre` and MAD `spread`,
    judging `candidates`: all of its samples, or any subset that holds every sample beyond `k`
    on either side (a loader may aggregate in the database and fetch only those)."""
    if k <= 0 or not math.isfinite(k):
        raise ValueError("k must be a positive finite number")
    if size < max(min_group, 1) or centre is None or spread is None:
        return GroupVerdict(size, None, None, (), OutlierGroupReason.TOO_FEW_DEVICES)
    side = bad_side(comparator)
    if side == 0:
        return GroupVerdict(size, centre, spread, (), OutlierGroupReason.NO_BAD_SIDE)
    if spread == 0:
        return GroupVerdict(size, centre, spread, (), OutlierGroupReason.MAD_ZERO)
    found = []
    for sample in candidates:
        if not math.isfinite(sample.value):
            continue
        z = robust_z(sample.value, centre, spread)
        if z * side > k:
            found.append(Outlier(sample.device_id, sample.hostname, sample.value, z))
    found.sort(key=lambda o: (-abs(o.robust_z), o.hostname, str(o.device_id)))
    return GroupVerdict(size, centre, spread, tuple(found), None if found else OutlierGroupReason.NONE_BEYOND_K)
