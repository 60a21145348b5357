"""Every CSV file the service writes, written here: a spreadsheet must never run what a satellite
reported.

A cell whose text starts with `=`, `+`, `-` or `@` (or a tab or a carriage return, which some
spreadsheets skip before reading a formula) is a formula to Excel, LibreOffice and Google Sheets:
`=HYPERLINK(…)` sends the sheet's data away, `@SUM(1+1)*cmd|' /C calc'!A0` runs a program through
DDE. Error texts, metric names and hostnames come from machines, so every text cell that starts
so is written with a leading single quote, as OWASP's CSV injection guidance advises (the quote
shows in the cell: the text is kept, not run). Numbers the service itself writes as numbers (a
count, a negative margin) are written as numbers, untouched: only text is neutralised.
"""

from __future__ import annotations

import csv
from collections.abc import Iterable
from decimal import Decimal
from typing import Protocol

#: What makes a spreadsheet read a cell as a formula (OWASP, "CSV Injection").
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")

Cell = str | int | float | Decimal


class SupportsWrite(Protocol):
    def write(self, text: str, /) -> object: ...


def safe_cell(value: object) -> Cell:
    """The cell as written: numbers as they are, None empty, anything else as text that cannot
    start a formula."""
    if value is None:
        return ""
    if isinstance(value, int | float | Decimal):  # bool is an int: written True/False, no formula
        return value
    text = str(value)
    return "'" + text if text.startswith(FORMULA_STARTS) else text


class SafeWriter:
    """`csv.writer`'s `writerow`, every cell through `safe_cell`."""

    def __init__(self, file: SupportsWrite) -> None:
        self._writer = csv.writer(file)

    def writerow(self, row: Iterable[object]) -> None:
        self._writer.writerow([safe_cell(value) for value in row])


def csv_writer(file: SupportsWrite) -> SafeWriter:
    """The one way the service writes CSV: like `csv.writer(file)`, with formula-looking text
    neutralised."""
    return SafeWriter(file)
