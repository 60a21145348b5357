"""Geometry of the metric pictures (server-rendered SVG): where each device's value and the
threshold fall on a strip. Plain arithmetic, no Django."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

WIDTH, HEIGHT, PAD = 720, 120, 24


@dataclass(frozen=True)
class Placed:
    x: float
    y: float

    @property
    def cross(self) -> str:
        """An SVG path drawing ✕ here: a failing value is a different shape, not only a colour."""
        return f"M{self.x - 4:.1f} {self.y - 4:.1f} l8 8 m0 -8 l-8 8"


@dataclass(frozen=True)
class Strip:
    """Values placed on a horizontal axis, jittered vertically so equal values stay visible."""

    lo: float
    hi: float
    points: list[Placed]
    threshold_x: float | None
    ticks: list[tuple[float, str]]


def strip(values: Sequence[float], threshold: float | None) -> Strip:
    pool = [*values, *([threshold] if threshold is not None else [])]
    lo, hi = (min(pool), max(pool)) if pool else (0.0, 1.0)
    if hi == lo:
        lo, hi = lo - 1, hi + 1
    span = hi - lo
    lo, hi = lo - span * 0.05, hi + span * 0.05

    def x(value: float) -> float:
        return PAD + (value - lo) / (hi - lo) * (WIDTH - 2 * PAD)

    # A deterministic jitter (the golden ratio), so a page renders the same twice.
    points = [Placed(x(v), PAD + ((i * 0.618034) % 1) * (HEIGHT - 2 * PAD)) for i, v in enumerate(values)]
    ticks = [(x(lo + (hi - lo) * k / 4), _label(lo + (hi - lo) * k / 4)) for k in range(5)]
    return Strip(lo, hi, points, x(threshold) if threshold is not None else None, ticks)


def _label(value: float) -> str:
    if value == 0 or not math.isfinite(value):
        return "0"
    magnitude = math.floor(math.log10(abs(value)))
    return f"{value:.{max(0, 2 - magnitude)}f}"


@dataclass(frozen=True)
class Labelled:
    """A point as drawn: where, what it is, and whether it carries a visible label (failures,
    outliers and the point asked for by `?highlight=` are named on the picture, not only on hover)."""

    point: Any  # the read model's point: target, execution_id, value, passed
    at: Placed
    outlier: tuple[float, float] | None  # (robust z, k) when it is an outlier among its siblings
    highlighted: bool

    @property
    def labelled(self) -> bool:
        return self.highlighted or self.outlier is not None or self.point.passed is False

    @property
    def label_y(self) -> float:
        """Above the point, or below it near the top edge."""
        return self.at.y - 9 if self.at.y > PAD + 6 else self.at.y + 16


def label(point: Any, at: Placed, outlier: tuple[float, float] | None, highlight: str) -> Labelled:
    return Labelled(point, at, outlier, bool(highlight) and point.target == highlight)


def metric_picture_anchor(resource_class: str, metric: str) -> str:
    """The id of one picture of the metrics page: a resource class's metric (`d2d_gbps.min`)."""
    return f"m-{resource_class}-{metric}"
