"""`fleet users add NAME --role viewer|operator|admin` and `fleet users list`."""

from __future__ import annotations

import getpass
import sys

from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError

from fleet.access.roles import ROLES
from fleet.access.users import user_add, users_list


class Command(BaseCommand):
    help = "Add a person with a standard role (viewer, operator, admin), or list people and their roles."

    def add_arguments(self, parser):
        commands = parser.add_subparsers(dest="action", required=True, metavar="{add,list}")
        add = commands.add_parser("add", help="Add a user with one role; the password is prompted for twice.")
        add.add_argument("username")
        add.add_argument("--role", required=True, choices=ROLES, help="What the person may do (see docs/dashboard.md).")
        add.add_argument(
            "--password-stdin",
            action="store_true",
            help="Read the password from the first line of standard input instead of prompting.",
        )
        commands.add_parser("list", help="Every user with their roles.")

    def handle(self, *args, **options):
        if options["action"] == "list":
            for person in users_list():
                roles = person.role + (" (superuser)" if person.superuser else "")
                flags = "" if person.active else " (inactive)"
                last = person.last_login.isoformat(timespec="seconds") if person.last_login else "never"
                self.stdout.write(f"{person.username}\t{roles}{flags}\tlast login {last}")
            return
        password = self._password(options["password_stdin"])
        try:
            person = user_add(username=options["username"], role=options["role"], password=password)
        except ValidationError as exc:
            problems = "; ".join(f"{field}: {' '.join(messages)}" for field, messages in exc.message_dict.items())
            raise CommandError(problems) from exc
        self.stdout.write(f"Added {person.username} as {person.role}.")

    def _password(self, from_stdin: bool) -> str:
        if from_stdin:
            line = sys.stdin.readline()
            if not line.strip():
                raise CommandError("password: standard input held no password.")
            return line.rstrip("\r\n")
        if not sys.stdin.isatty():
            raise CommandError("password: no terminal to prompt on; pass --password-stdin and pipe it in.")
        first = getpass.getpass("Password: ")
        if first != getpass.getpass("Password (again): "):
            raise CommandError("password: the two passwords differ.")
        return first
