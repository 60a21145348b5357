"""One writer of device state, one locker of devices — read from the sources, as
`tests/core/test_statements.py` reads them. Outside `fleet.lifecycle` no module writes a device's
`state` or a `DeviceStateChange` (history), and outside `fleet.core.locks` no module locks devices
(`select_for_update` of devices) or writes `FOR … UPDATE` in SQL. The registered statements are read
too: none outside the lifecycle updates the device table or inserts history, except through the
lifecycle's own chain (`TRANSITIONS_CHAIN`), composed in whole."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

import fleet
from fleet.core.statements import REGISTRY
from fleet.inventory.models import Device
from fleet.lifecycle.models import DeviceStateChange
from fleet.lifecycle.services import TRANSITIONS_CHAIN
from tests.core.test_statements import _import_everything

SRC = Path(fleet.__file__).parent
LIFECYCLE = SRC / "lifecycle"
LOCKS = SRC / "core" / "locks.py"

#: Query methods that write rows.
WRITES = {"create", "bulk_create", "update", "bulk_update", "delete", "get_or_create", "update_or_create"}
#: Row locks written as SQL text.
SQL_LOCK = re.compile(r"\bFOR\s+(NO\s+KEY\s+)?UPDATE\b|\bFOR\s+(KEY\s+)?SHARE\b", re.IGNORECASE)


def _chain_root(node: ast.expr) -> ast.expr:
    """The start of `a.b(…).c(…)`: `a`."""
    while True:
        if isinstance(node, ast.Call):
            node = node.func
        elif isinstance(node, (ast.Attribute, ast.Subscript)):
            node = node.value
        else:
            return node


def _root_name(node: ast.expr) -> str:
    root = _chain_root(node)
    return root.id if isinstance(root, ast.Name) else ""


def _of_devices(node: ast.expr) -> bool:
    """A query or an object of devices, by its name: `Device.objects…`, `device`, `devices`, …"""
    return "device" in _root_name(node).lower() and _root_name(node) != DeviceStateChange.__name__


def _names_state(node: ast.AST) -> bool:
    return any(isinstance(n, ast.Constant) and n.value == "state" for n in ast.walk(node))


def _lock(node: ast.AST) -> str | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, str) and SQL_LOCK.search(node.value):
        return "a row lock written in SQL (compose fleet.core.locks.locked_sql)"
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "select_for_update"
        and _of_devices(node.func.value)
    ):
        return "devices locked outside fleet.core.locks"
    return None


def _write(node: ast.AST) -> str | None:
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
        method, receiver = node.func.attr, node.func.value
        named = [k.value for k in node.keywords if k.arg in {"fields", "update_fields"}] + node.args[1:]
        writes_state = any(k.arg == "state" for k in node.keywords) or any(_names_state(n) for n in named)
        if method in {"update", "bulk_update", "save"} and _of_devices(receiver) and writes_state:
            return f"Device.state written outside fleet.lifecycle ({method})"
        if method in WRITES and _root_name(receiver) == DeviceStateChange.__name__:
            return f"DeviceStateChange written outside fleet.lifecycle ({method})"
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == DeviceStateChange.__name__:
        return "DeviceStateChange made outside fleet.lifecycle"
    if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        for target in targets:
            for element in target.elts if isinstance(target, ast.Tuple) else [target]:
                if isinstance(element, ast.Attribute) and element.attr == "state" and _of_devices(element.value):
                    return "Device.state assigned outside fleet.lifecycle"
    return None


def offences(path: str, source: str) -> list[str]:
    """What in this module's source writes device state or history, or locks devices, outside the
    two places allowed to (each as `path:line what`): the lifecycle writes, the locker locks."""
    checks = [] if path.startswith("lifecycle/") else [_write]
    if path != "core/locks.py":
        checks.append(_lock)
    return [
        f"{path}:{getattr(node, 'lineno', 0)} {said}"
        for node in ast.walk(ast.parse(source, path))
        for check in checks
        if (said := check(node)) is not None
    ]


def _sources() -> Iterator[tuple[str, str]]:
    for path in sorted(SRC.rglob("*.py")):
        if "migrations" not in path.parts:
            yield str(path.relative_to(SRC)), path.read_text()


def test_only_the_lifecycle_writes_device_state_and_history_and_only_the_locker_locks_devices():
    found = [offence for path, source in _sources() for offence in offences(path, source)]
    assert not found, (
        "device state and history are written only by fleet.lifecycle (transitions_apply), devices "
        f"locked only through fleet.core.locks: {found}"
    )


@pytest.mark.parametrize(
    ("planted", "said"),
    [
        ("Device.objects.filter(id=1).update(state='accepted')", "Device.state written"),
        ("device.state = 'accepted'\ndevice.save(update_fields=['state', 'updated_at'])", "Device.state assigned"),
        ("device.save(update_fields=['state'])", "Device.state written outside fleet.lifecycle (save)"),
        ("Device.objects.bulk_update(devices, ['serial', 'state'])", "Device.state written"),
        ("DeviceStateChange.objects.bulk_create([])", "DeviceStateChange written"),
        ("DeviceStateChange(device=d, from_state='a', to_state='b')", "DeviceStateChange made"),
        ("Device.objects.select_for_update(no_key=True).get(id=1)", "devices locked outside fleet.core.locks"),
        ("X = 'SELECT id FROM d ORDER BY id FOR NO KEY UPDATE'", "a row lock written in SQL"),
    ],
)
def test_the_walk_finds_a_planted_write_or_lock(planted, said):
    found = offences("burnin/planted.py", planted)
    assert found and said in found[0], found
    if "lock" not in said:  # the lifecycle itself may write
        assert not offences("lifecycle/services.py", planted)


def test_the_walk_lets_other_state_and_other_locks_be():
    allowed = "\n".join(
        [
            "plan.state = state.as_json()",  # an isolation plan's state, not a device's
            "plan.save(update_fields=['state'])",
            "Job.objects.select_for_update(skip_locked=True)",
            "Device.objects.bulk_update(devices, ['serial', 'enrolled_at'])",
            "DeviceStateChange.objects.filter(device=d)",  # reading history
        ]
    )
    assert offences("burnin/planted.py", allowed) == []


def test_no_statement_outside_the_lifecycle_moves_devices_but_through_its_chain():
    _import_everything()
    device, change = Device._meta.db_table, DeviceStateChange._meta.db_table
    writes = re.compile(rf"\bUPDATE\s+{device}\b|\bINSERT\s+INTO\s+{change}\b", re.IGNORECASE)
    found = [
        name
        for name, statement in REGISTRY.items()
        if not name.startswith("lifecycle.") and writes.search(statement.text.replace(TRANSITIONS_CHAIN, ""))
    ]
    assert not found, f"statements writing device state or history outside the lifecycle's chain: {found}"
    composing = [name for name, s in REGISTRY.items() if TRANSITIONS_CHAIN in s.text]
    assert "burnin.certificates.issue" in composing and "lifecycle.transitions_apply" in composing
