"""What a device's hostname may be: DNS-style, `[A-Za-z0-9][A-Za-z0-9._-]*`, at most 253 characters.

A hostname names files (`fleet certificate export` writes `<hostname>.<serial>.json`) and URL
path segments (the dashboard's device pages), so free text was a path out of the export directory
(`../../../escape-X`, an absolute name) and a 500 on the site grid (a `/`). The rule is checked
where a hostname enters: the model field's validator (the admin, any model form), the fleet
file's schema (`fleet apply`) and a named database constraint under both; rows from before it are
reported by the system check `inventory.E001` and make migration `inventory.0004` refuse to run
(docs/fleet-file.md). The API has no operation that writes a hostname.
"""

from __future__ import annotations

import re

from django.core.exceptions import ValidationError

MAX_HOSTNAME_LENGTH = 253
#: The rule as the fleet file and the messages spell it.
HOSTNAME_RULE = "[A-Za-z0-9][A-Za-z0-9._-]*"
#: The rule with its length, anchored, as Python and PostgreSQL regular expressions both read it.
HOSTNAME_PATTERN = rf"^[A-Za-z0-9][A-Za-z0-9._-]{{0,{MAX_HOSTNAME_LENGTH - 1}}}$"
_HOSTNAME = re.compile(rf"[A-Za-z0-9][A-Za-z0-9._-]{{0,{MAX_HOSTNAME_LENGTH - 1}}}")


def hostname_problem(value: str) -> str | None:
    """Why `value` is not a hostname, or None when it is one."""
    if _HOSTNAME.fullmatch(value) is not None:
        return None
    if len(value) > MAX_HOSTNAME_LENGTH:
        return f"is {len(value)} characters long; a hostname has at most {MAX_HOSTNAME_LENGTH}"
    return (
        f"{value!r} is not a hostname: letters, digits, '.', '_' and '-' ({HOSTNAME_RULE}), "
        f"starting with a letter or digit, at most {MAX_HOSTNAME_LENGTH} characters"
    )


def validate_hostname(value: str) -> None:
    """The model field's validator."""
    problem = hostname_problem(value)
    if problem is not None:
        raise ValidationError(f"hostname: {problem}.", code="invalid_hostname")
