"""The `fleet` command: the project's manage.py (every Django management command is
`fleet <command>`), plus the project's own commands (`serve`, `apply`, `export`, ...).

`fleet`, `fleet --help` and `fleet help` list the product's own commands first, grouped, each with
its one line; Django's own (migrate, shell, …) are one `fleet help --all` away. A command that
meets a database without its schema (right after `make reset`) or no database server at all says
so in one line, with what to run, instead of a traceback."""

from __future__ import annotations

import os
import re
import sys
from typing import NoReturn

#: The product's commands, grouped as an operator meets them. A product command missing here is
#: still listed, under "more" (the list is read from the installed apps, not kept by hand).
GROUPS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("Start here", ("demo", "serve", "apply", "export")),
    ("People and machines", ("users", "roles", "client-credentials", "satellite-credentials")),
    ("Burn-in", ("reconcile", "rerun", "isolate")),
    ("Evidence", ("certificate", "evidence-pack", "keys")),
    ("Events out", ("deliver",)),
)
#: Django's commands an operator of this service uses, named under the product's.
DJANGO_USED = ("migrate", "createsuperuser", "shell", "dbshell", "check")


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
    if argv[1:3] == ["evidence-pack", "verify"] and not {"-h", "--help"} & set(argv[3:]):
        _verify_pack(argv[3:])  # with --keys a pure reader that exits here, before Django loads
    if argv[1:2] in (["serve"], ["demo"], ["runserver"]) and not os.environ.get("SECRET_KEY"):
        from fleet.core.datadir import data_dir, secret_key_ensure

        secret_key_ensure(data_dir(os.environ))  # before the settings read it (and before any worker)
    if argv[1:] in ([], ["help"], ["--help"], ["-h"]):
        sys.stdout.write(product_help() + "\n")
        return
    if argv[1:] == ["help", "--all"]:
        argv = [argv[0], "help"]  # Django's own listing, every command
    from django.core.management import execute_from_command_line

    try:
        execute_from_command_line(argv)
    except Exception as exc:
        problem = database_problem(exc)
        if problem is None:
            raise
        fail(problem)


def _verify_pack(args: list[str]) -> None:
    """`fleet evidence-pack verify`: with `--keys`, the offline reader (no settings, no database,
    nothing written); without, the keys come from the database DATABASE_URL names — never from an
    embedded PostgreSQL started for it — else one line saying what to give."""
    from fleet.burnin.evidence import offline

    if offline.names_keys(args):
        raise SystemExit(offline.main(args))
    if not os.environ.get("DATABASE_URL"):
        fail(
            "no keys to verify with: give --keys (the service's /api/v1/certificates/keys/ URL, or a file "
            "holding its JSON), or set DATABASE_URL to read the keys the service published"
        )


def product_help(program: str = "fleet") -> str:
    """The product's commands by group, each with its help's first sentence."""
    import django
    from django.core.management import get_commands, load_command_class

    django.setup()
    mine = {name: app for name, app in get_commands().items() if app == "fleet" or app.startswith("fleet.")}
    grouped = [(title, [n for n in names if n in mine]) for title, names in GROUPS]
    listed = {n for _, names in grouped for n in names}
    if extra := sorted(set(mine) - listed):
        grouped.append(("More", extra))
    width = max(len(name) for name in mine)
    lines = [
        f"usage: {program} <command> [options]      {program} help <command>: a command's options",
        "",
        "fleet-burnin: decides whether GPU servers are fit to be sold (README.md).",
    ]
    for title, names in grouped:
        if not names:
            continue
        lines += ["", f"{title}:"]
        for name in names:
            summary = _first_sentence(getattr(load_command_class(mine[name], name), "help", ""))
            lines.append(f"  {name.ljust(width)}  {summary}")
    lines += [
        "",
        f"Django's own commands work too ({', '.join(DJANGO_USED)}, …): `{program} help --all` lists them.",
    ]
    return "\n".join(lines)


def _first_sentence(text: str) -> str:
    text = " ".join(text.split())
    head = re.split(r"(?<!e\.g)(?<!i\.e)\. ", text, maxsplit=1)[0]
    return head if head.endswith(".") or head == text else head + "."


def database_problem(exc: BaseException) -> str | None:
    """One line for the database errors a person fixes with one command, else None."""
    from django.conf import settings
    from django.db import utils as db
    from psycopg import errors

    cause = exc.__cause__
    name = settings.DATABASES["default"].get("NAME", "")
    if isinstance(exc, db.ProgrammingError) and isinstance(cause, errors.UndefinedTable):
        missing = str(cause).strip().splitlines()[0]
        return (
            f"the database {name} has no schema yet ({missing}): run `fleet migrate` "
            "(or `make run`, which migrates and starts the demo)"
        )
    if isinstance(exc, db.OperationalError):
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        if isinstance(cause, errors.OperationalError) and f'database "{name}" does not exist' in str(exc):
            return f"the database {name} does not exist: `make run` creates it (or create it, then `fleet migrate`)"
        return f"cannot open the database {name}: {first} (is the server up? DATABASE_URL names it)"
    return None


def fail(message: str) -> NoReturn:
    sys.stderr.write(f"fleet: {message}\n")
    raise SystemExit(1)


if __name__ == "__main__":
    main()
