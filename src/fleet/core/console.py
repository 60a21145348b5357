"""Rich output for management commands: a console that writes where the command's stdout goes
(so `call_command(..., stdout=buffer)` captures it in tests)."""

from __future__ import annotations

from typing import IO, cast

from django.core.management.base import BaseCommand
from rich.console import Console


def command_console(command: BaseCommand, *, width: int = 100) -> Console:
    return Console(file=cast(IO[str], command.stdout._out), width=width)
