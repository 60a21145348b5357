"""The host's firmware identity from `/sys/class/dmi/id`: BIOS version and system serial.

Two ways in, one result: `read_dmi_directory` reads the files of a local sysfs, and `parse_dmi` reads the output
of `grep -H . /sys/class/dmi/id/bios_version /sys/class/dmi/id/product_serial` run on the device (one
`<path>:<value>` line per readable file; `product_serial` is readable by root only, so an unprivileged agent
gets no line for it). A field that could not be read, or that holds one of the placeholders board vendors leave
in unprogrammed DMI tables (`To Be Filled By O.E.M.`, `Default string`, …), is None and its reason is listed in
`missing`: a serial is never invented.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from fleet_agent.parsers import ParseError

__all__ = ["DMI_DIRECTORY", "DMI_FIELDS", "parse_dmi", "read_dmi_directory"]

DMI_DIRECTORY = Path("/sys/class/dmi/id")
#: sysfs file → inventory key.
DMI_FIELDS: Mapping[str, str] = {"bios_version": "bios_version", "product_serial": "system_serial"}
_PLACEHOLDERS = frozenset(
    {
        "", "to be filled by o.e.m.", "default string", "not specified", "not applicable", "system serial number",
        "0123456789", "none", "n/a", "na", "unknown", "0",
    }
)  # fmt: skip
_LINE = re.compile(r"^(?P<path>/?[^:\s]*?(?P<name>[a-z_]+)):(?P<value>.*)$")


def parse_dmi(text: str, parameters: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """`{bios_version, system_serial, missing}` from `grep -H .` output over the DMI files."""
    found: dict[str, str] = {}
    for raw in text.splitlines():
        match = _LINE.match(raw.strip())
        if match is not None and match.group("name") in DMI_FIELDS:
            found[match.group("name")] = match.group("value")
    if not found:
        raise ParseError("no DMI field could be read (is /sys/class/dmi/id there, and readable?)")
    return _result(found, {name: "not readable" for name in DMI_FIELDS if name not in found})


def read_dmi_directory(directory: Path = DMI_DIRECTORY) -> dict[str, Any]:
    """The same result from a local sysfs directory."""
    found: dict[str, str] = {}
    unread: dict[str, str] = {}
    for name in DMI_FIELDS:
        try:
            found[name] = (directory / name).read_text(errors="replace")
        except FileNotFoundError:
            unread[name] = "absent"
        except PermissionError:
            unread[name] = "permission denied"
        except OSError as exc:
            unread[name] = exc.strerror or "unreadable"
    return _result(found, unread)


def _result(found: Mapping[str, str], unread: Mapping[str, str]) -> dict[str, Any]:
    result: dict[str, Any] = dict.fromkeys(DMI_FIELDS.values())
    missing = [f"dmi: {name}: {why}" for name, why in unread.items()]
    for name, raw in found.items():
        value = raw.strip()
        if value.lower() in _PLACEHOLDERS:
            missing.append(f"dmi: {name}: a placeholder, not a value ({value[:60]!r})")
            continue
        result[DMI_FIELDS[name]] = value[:200]
    result["missing"] = missing
    return result
