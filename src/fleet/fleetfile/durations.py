"""The fleet file's durations (`evidence_valid_for: 30d`): a whole number of days, hours, minutes or
seconds, read and written in one place."""

from __future__ import annotations

import re
from datetime import timedelta

DURATION = re.compile(r"^([1-9][0-9]{0,6})([dhms])$")
DURATION_UNITS = {"d": "days", "h": "hours", "m": "minutes", "s": "seconds"}


def duration_parse(value: object) -> timedelta | None:
    """`30d`, `12h`, `90m`, `3600s` as a timedelta; None for anything else."""
    match = DURATION.match(value) if isinstance(value, str) else None
    if match is None:
        return None
    return timedelta(**{DURATION_UNITS[match.group(2)]: int(match.group(1))})


def duration_text(value: timedelta) -> str:
    """The fleet file's spelling of a duration: the largest unit that divides it."""
    seconds = int(value.total_seconds())
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds % size == 0:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"
