"""The `fleet` command: the project's manage.py (every Django management command is
`fleet <command>`), plus the project's own commands (`serve`, `apply`, `export`, ...)."""

from __future__ import annotations

import os
import sys


def main(argv: list[str] | None = None) -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "fleet.settings")
    from django.core.management import execute_from_command_line

    execute_from_command_line(argv if argv is not None else sys.argv)


if __name__ == "__main__":
    main()
