"""The `fleet` command: the project's manage.py (every Django management command is
`fleet <command>`), plus the project's own commands (`serve`, `apply`, `export`, ...)."""

from __future__ import annotations

import os
import sys


def main(argv: list[str] | None = None) -> None:
    argv = argv if argv is not None else sys.argv
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "fleet.settings")
    # Read by the settings (database timeouts and pooling): a child process of a command, e.g.
    # the server `fleet demo` starts, sets its own role when its `fleet` command starts.
    serving = argv[1:2] == ["serve"]
    os.environ["FLEET_PROCESS_ROLE"] = "server" if serving else "command"
    if serving:
        from fleet.core import multiprocess

        multiprocess.prepare()  # before anything imports prometheus-client
    from django.core.management import execute_from_command_line

    execute_from_command_line(argv)


if __name__ == "__main__":
    main()
