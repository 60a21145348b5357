"""The blast radius of a site's autopilot: how many devices may be under test (hold an active job)
at once, so that a wrong threshold, a bad test image or a power event never takes a whole hall.

Three limits hold together: at most `max_under_test` devices of the site, at most a resource
class's own limit of that class (its policy's `autopilot.max_under_test`, the site's when unset),
and at most `rack_allowance(rack_share, rack size)` devices of one rack for single-device work. A
collective holds its whole rack (it cannot run on less), so a unit that is a whole rack counts
against the site and class limits only. Units are admitted greedily in the order given (the
autopilot's priorities: `fleet_rules.autopilot`; single devices rack by rack, so the first nodes
of a rack go together); a unit that does not fit is skipped and a later smaller one may
still fit. Devices already under test (anybody's jobs) count first. Pure.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from uuid import UUID


@dataclass(frozen=True)
class Radius:
    """The limits of one site."""

    max_under_test: int
    rack_share: float = 1.0
    class_limits: Mapping[str, int] = field(default_factory=dict)

    def class_limit(self, resource_class: str) -> int:
        return min(self.max_under_test, self.class_limits.get(resource_class, self.max_under_test))


@dataclass(frozen=True)
class Placed:
    """Where a device stands for the limits: its class, its rack (label) and that rack's size."""

    device_id: UUID
    resource_class: str
    rack: str | None = None
    rack_size: int = 1


@dataclass(frozen=True)
class Unit:
    """Devices that go under test together: one device's tests, or a collective on a whole rack."""

    devices: tuple[Placed, ...]
    whole_rack: bool = False

    @property
    def device_ids(self) -> tuple[UUID, ...]:
        return tuple(p.device_id for p in self.devices)


def rack_allowance(share: float, size: int) -> int:
    """Devices of a rack of `size` that may run single-device tests at once: at least one."""
    return max(1, math.ceil(share * size - 1e-9))


@dataclass
class Load:
    """Devices under test now, by site, class and rack (what `admit` counts against)."""

    site: int = 0
    by_class: dict[str, int] = field(default_factory=dict)
    by_rack: dict[str, int] = field(default_factory=dict)
    devices: set[UUID] = field(default_factory=set)

    @classmethod
    def of(cls, under_test: Iterable[Placed]) -> Load:
        load = cls()
        for placed in under_test:
            load.add(placed)
        return load

    def add(self, placed: Placed) -> None:
        if placed.device_id in self.devices:
            return
        self.devices.add(placed.device_id)
        self.site += 1
        self.by_class[placed.resource_class] = self.by_class.get(placed.resource_class, 0) + 1
        if placed.rack is not None:
            self.by_rack[placed.rack] = self.by_rack.get(placed.rack, 0) + 1

    def fits(self, unit: Unit, radius: Radius) -> bool:
        """Whether the unit's devices, none of them under test yet, stay within every limit."""
        if any(p.device_id in self.devices for p in unit.devices):
            return False
        if self.site + len(unit.devices) > radius.max_under_test:
            return False
        classes: dict[str, int] = {}
        racks: dict[str, tuple[int, int]] = {}
        for placed in unit.devices:
            classes[placed.resource_class] = classes.get(placed.resource_class, 0) + 1
            if placed.rack is not None:
                count, size = racks.get(placed.rack, (0, placed.rack_size))
                racks[placed.rack] = (count + 1, max(size, placed.rack_size))
        for resource_class, count in classes.items():
            if self.by_class.get(resource_class, 0) + count > radius.class_limit(resource_class):
                return False
        if unit.whole_rack:
            return True
        return all(
            self.by_rack.get(rack, 0) + count <= rack_allowance(radius.rack_share, size)
            for rack, (count, size) in racks.items()
        )


def admit(units: Sequence[Unit], *, under_test: Iterable[Placed], radius: Radius) -> list[Unit]:
    """The units, in their order, that fit within the radius given what is under test already.

    A whole rack that does not fit *for want of room* (it could fit once jobs end) stops the
    admission there: units after it would take the slots it waits for, pass after pass, and it
    would never start. A rack larger than the limit itself can never run
    and blocks nothing (`never_fits`)."""
    load = Load.of(under_test)
    admitted: list[Unit] = []
    for unit in units:
        if not unit.devices:
            continue
        if load.fits(unit, radius):
            admitted.append(unit)
            for placed in unit.devices:
                load.add(placed)
        elif unit.whole_rack and not never_fits(unit, radius):
            break
    return admitted


def never_fits(unit: Unit, radius: Radius) -> bool:
    """Whether the unit is larger than the site's or one of its classes' limits."""
    if len(unit.devices) > radius.max_under_test:
        return True
    classes: dict[str, int] = {}
    for placed in unit.devices:
        classes[placed.resource_class] = classes.get(placed.resource_class, 0) + 1
    return any(count > radius.class_limit(rc) for rc, count in classes.items())
