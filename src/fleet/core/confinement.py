"""Files written where they were asked for, and nowhere else.

A file name built from data (a certificate's file is named after its device's hostname) is joined
to the directory the operator named, resolved (`..`, an absolute name, a symbolic link already
there), and refused unless the result is a file directly inside that directory. Hostnames are
validated where they enter (fleet.inventory.hostnames); this is the defence behind that one."""

from __future__ import annotations

from pathlib import Path


class OutsideDirectory(ValueError):
    """The name would put the file outside the directory."""


def file_inside(directory: Path, name: str) -> Path:
    """`directory / name`, resolved, when that is a file directly inside `directory`; else
    `OutsideDirectory`."""
    root = directory.resolve()
    if "\x00" in name or not name or name in (".", ".."):
        raise OutsideDirectory(f"{name!r} is not a file name")
    target = (root / name).resolve()
    if target.parent != root:
        raise OutsideDirectory(f"{name!r} would be written outside {root}")
    return target
