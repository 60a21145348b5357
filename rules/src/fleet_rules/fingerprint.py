"""A device's hardware fingerprint: the inventory its agent reads at the start of every job
(GPUs from `nvidia-smi -q -x`, HCAs from `ibstat`, the host from DMI), its canonical form and
hash, and what changed between two of them in words.

The canonical form is RFC 8785 over the inventory with every member present (an absent member
reads as null or empty, so two spellings of one reading hash alike); the fingerprint's hash is the
SHA-256 hex of those bytes. The service keeps a new snapshot whenever the hash moves.

Not every difference is a change of what a certificate vouches for. `changes` sorts them:

* **supersedes** — the hardware or its firmware is another: a GPU or an HCA added or removed, a
  GPU's UUID, serial, PCI bus id, VBIOS, part number or product, an HCA's firmware or node GUID,
  the host's BIOS or system serial, the driver or CUDA version. A certificate binding the older
  fingerprint stops holding (`SupersedeReason.HARDWARE_CHANGED`).
* **recorded only** — a reading changed, not the hardware: a value that became unreadable (or
  readable again), a whole part that could not be read (named in `missing`), an HCA port's state
  or rate (link conditions, which the burn-in tests judge). Unknown is never a change: a GPU whose
  serial could not be read is not "another GPU".

GPUs are matched by PCI bus id (the slot), then in order; HCAs by name, ports by number. "GPU 3"
is the GPU's index in nvidia-smi's order. Pure: no Django, no database.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from fleet_rules.canonical import canonical_json
from fleet_rules.vocabulary import RepairPartCheck

#: The members of one GPU, in the order they are told; with their words in a change.
GPU_FIELDS: tuple[tuple[str, str], ...] = (
    ("uuid", "UUID"),
    ("serial", "serial"),
    ("pci_bus_id", "PCI bus id"),
    ("vbios_version", "VBIOS"),
    ("part_number", "part number"),
    ("product_name", "product"),
)
HCA_FIELDS: tuple[tuple[str, str], ...] = (("firmware_version", "firmware"), ("node_guid", "node GUID"))
PORT_FIELDS: tuple[tuple[str, str], ...] = (("state", "state"), ("rate_gbps", "rate (Gb/s)"))
HOST_FIELDS: tuple[tuple[str, str], ...] = (("bios_version", "BIOS"), ("system_serial", "system serial"))
TOP_FIELDS: tuple[tuple[str, str], ...] = (("driver_version", "driver"), ("cuda_version", "CUDA"))

#: A value is told up to this many characters (the rest is `…`): a change stays one readable line.
SHOWN = 64


def normalised(inventory: Mapping[str, Any]) -> dict[str, Any]:
    """The inventory with every member present, nothing else, in the wire's shape."""
    host = inventory.get("host") or {}
    return {
        "driver_version": inventory.get("driver_version"),
        "cuda_version": inventory.get("cuda_version"),
        "gpus": [{name: gpu.get(name) for name, _ in GPU_FIELDS} for gpu in inventory.get("gpus") or []],
        "hcas": [
            {
                "name": hca.get("name"),
                **{name: hca.get(name) for name, _ in HCA_FIELDS},
                "ports": [
                    {"port": port.get("port"), **{name: port.get(name) for name, _ in PORT_FIELDS}}
                    for port in hca.get("ports") or []
                ],
            }
            for hca in inventory.get("hcas") or []
        ],
        "host": {name: host.get(name) for name, _ in HOST_FIELDS},
        "missing": list(inventory.get("missing") or []),
    }


def canonical(inventory: Mapping[str, Any]) -> bytes:
    """RFC 8785 bytes of the normalised inventory: what is hashed, kept and bound."""
    return canonical_json(normalised(inventory))


def sha256(inventory: Mapping[str, Any]) -> str:
    return digest(canonical(inventory))


def digest(canonical_bytes: bytes) -> str:
    """The fingerprint's hash: SHA-256 hex of its canonical bytes (`canonical`)."""
    return hashlib.sha256(canonical_bytes).hexdigest()


@dataclass(frozen=True)
class Change:
    """One difference between two inventories, in words. `supersedes`: the hardware (or its
    firmware, driver) is another, so a certificate binding the older one stops holding."""

    part: str  # "gpu", "hca", "host", "driver", "reading"
    text: str
    supersedes: bool


def _shown(value: Any) -> str:
    text = "unreadable" if value is None else str(value)
    return text if len(text) <= SHOWN else text[: SHOWN - 1] + "…"


def _field_changes(part: str, subject: str, fields: Sequence[tuple[str, str]], old: Any, new: Any) -> list[Change]:
    found = []
    for name, words in fields:
        before, after = old.get(name), new.get(name)
        if before == after:
            continue
        known = before is not None and after is not None
        text = f"{subject} {words} {_shown(before)} → {_shown(after)}".lstrip()
        found.append(Change(part if known else "reading", text, known))
    return found


def _gpu_label(index: int, gpu: Mapping[str, Any]) -> str:
    bus = gpu.get("pci_bus_id")
    return f"GPU {index} ({_shown(bus)})" if bus is not None else f"GPU {index}"


def _pairs(
    old: Sequence[Mapping[str, Any]], new: Sequence[Mapping[str, Any]], key: str
) -> tuple[list[tuple[int, int]], list[int], list[int]]:
    """Items matched by `key` (where both know it), then the rest in order; and the unmatched
    indices of `old` (removed) and of `new` (added)."""
    by_key: dict[Any, list[int]] = {}
    for i, item in enumerate(old):
        if item.get(key) is not None:
            by_key.setdefault(item.get(key), []).append(i)
    pairs, taken = [], set()
    rest_new = []
    for j, item in enumerate(new):
        waiting = by_key.get(item.get(key)) if item.get(key) is not None else None
        if waiting:
            i = waiting.pop(0)
            pairs.append((i, j))
            taken.add(i)
        else:
            rest_new.append(j)
    rest_old = [i for i in range(len(old)) if i not in taken]
    # The rest pair up in order only where neither side knows the key (a GPU whose bus id could
    # not be read); two different known keys are two different slots.
    unkeyed_old = [i for i in rest_old if old[i].get(key) is None]
    unkeyed_new = [j for j in rest_new if new[j].get(key) is None]
    for i, j in zip(unkeyed_old, unkeyed_new, strict=False):
        pairs.append((i, j))
        rest_old.remove(i)
        rest_new.remove(j)
    return sorted(pairs, key=lambda p: p[1]), rest_old, rest_new


def _section_unreadable(
    label: str,
    old_items: Sequence[Any],
    new_items: Sequence[Any],
    old_missing: Sequence[str],
    new_missing: Sequence[str],
) -> Change | None:
    """A part with nothing read on one side while its reading failed there: unknown, not a change."""
    if old_items and not new_items and new_missing:
        return Change("reading", f"{label} unreadable now (was {len(old_items)})", False)
    if new_items and not old_items and old_missing:
        return Change("reading", f"{label} readable again ({len(new_items)})", False)
    return None


def changes(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[Change]:
    """What changed from `old` to `new`, in a stable order: driver, GPUs, HCAs, host, readings."""
    a, b = normalised(old), normalised(new)
    found: list[Change] = []
    found += _field_changes("driver", "", TOP_FIELDS, a, b)
    for section in _SECTIONS:
        found += _section_changes(section, a, b)
    found += _field_changes("host", "host", HOST_FIELDS, a["host"], b["host"])
    gone = [m for m in a["missing"] if m not in b["missing"]]
    came = [m for m in b["missing"] if m not in a["missing"]]
    if came:
        found.append(Change("reading", "could not read: " + "; ".join(_shown(m) for m in came), False))
    if gone:
        found.append(Change("reading", "read again: " + "; ".join(_shown(m) for m in gone), False))
    return found


def _port_changes(subject: str, old: Mapping[str, Any], new: Mapping[str, Any]) -> list[Change]:
    """An HCA's ports: link conditions, not the hardware (never superseding)."""
    found = []
    pairs, gone, came = _pairs(old["ports"], new["ports"], "port")
    for p, q in pairs:
        port = new["ports"][q]
        for change in _field_changes("hca", f"{subject} port {port['port']}", PORT_FIELDS, old["ports"][p], port):
            found.append(Change("reading", change.text, False))
    found += [Change("reading", f"{subject} port {old['ports'][p]['port']} gone", False) for p in gone]
    found += [Change("reading", f"{subject} port {new['ports'][q]['port']} appeared", False) for q in came]
    return found


@dataclass(frozen=True)
class _Section:
    """A list of parts of the inventory and how its items are told apart, named and compared."""

    key: str  # the inventory's member: "gpus", "hcas"
    label: str  # in "GPUs unreadable now"
    part: str  # `Change.part`
    match_by: str  # the member that is the same for the same part (its slot)
    fields: Sequence[tuple[str, str]]
    identity: tuple[str, str]  # the member that names the part to its vendor, in words
    name: Callable[[int, Mapping[str, Any]], str]
    within: Callable[[str, Mapping[str, Any], Mapping[str, Any]], list[Change]] = lambda _s, _o, _n: []


_SECTIONS = (
    _Section("gpus", "GPUs", "gpu", "pci_bus_id", GPU_FIELDS, ("serial", "serial"), _gpu_label),
    _Section(
        "hcas",
        "HCAs",
        "hca",
        "name",
        HCA_FIELDS,
        ("node_guid", "node GUID"),
        lambda _index, hca: f"HCA {_shown(hca['name'])}",
        _port_changes,
    ),
)


def _section_changes(section: _Section, a: dict[str, Any], b: dict[str, Any]) -> list[Change]:
    """The section's pairs that changed, then the parts removed, then the parts added (the two
    last always supersede: the hardware is another)."""
    old, new = a[section.key], b[section.key]
    unreadable = _section_unreadable(section.label, old, new, a["missing"], b["missing"])
    if unreadable is not None:
        return [unreadable]
    pairs, removed, added = _pairs(old, new, section.match_by)
    found = []
    for i, j in pairs:
        subject = section.name(j, new[j])
        found += _field_changes(section.part, subject, section.fields, old[i], new[j])
        found += section.within(subject, old[i], new[j])
    member, words = section.identity
    for how, indices, items in (("removed", removed, old), ("added", added, new)):
        for i in indices:
            text = f"{section.name(i, items[i])} {how} ({words} {_shown(items[i][member])})"
            found.append(Change(section.part, text, True))
    return found


def supersedes(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[Change]:
    """The changes from `old` to `new` that make a certificate binding `old` stop holding."""
    return [change for change in changes(old, new) if change.supersedes]


def summary(found: Iterable[Change], *, limit: int = 600) -> str:
    """The changes as one line (a history entry's reason), at most `limit` characters."""
    text = "; ".join(change.text for change in found)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def identifiers(inventory: Mapping[str, Any]) -> set[str]:
    """Every serial-like value the inventory reports (GPU serials and UUIDs, HCA node GUIDs, the
    system serial), folded for comparison with what a technician typed."""
    found: list[Any] = []
    inv = normalised(inventory)
    for gpu in inv["gpus"]:
        found += [gpu["serial"], gpu["uuid"]]
    found += [hca["node_guid"] for hca in inv["hcas"]]
    found.append(inv["host"]["system_serial"])
    return {_fold(value) for value in found if isinstance(value, str) and _fold(value)}


def _fold(value: str) -> str:
    return value.strip().casefold()


@dataclass(frozen=True)
class PartCheck:
    """One part of a repair record checked against the fingerprint read after the repair."""

    kind: str
    slot: str
    installed_serial: str
    removed_serial: str
    outcome: RepairPartCheck

    @property
    def mismatch(self) -> bool:
        """The hardware read after the repair contradicts the record."""
        return self.outcome in (RepairPartCheck.NOT_SEEN, RepairPartCheck.REMOVED_STILL_SEEN)

    @property
    def confirmed(self) -> bool:
        return self.outcome == RepairPartCheck.SEEN

    @property
    def text(self) -> str:
        what = f"{self.kind} {self.slot}".strip() or "part"
        return {
            RepairPartCheck.SEEN: f"{what}: installed {self.installed_serial} is reported",
            RepairPartCheck.NOT_SEEN: f"{what}: installed {self.installed_serial} is not reported",
            RepairPartCheck.REMOVED_STILL_SEEN: f"{what}: removed {self.removed_serial} is still reported",
            RepairPartCheck.NO_SERIAL: f"{what}: no installed serial recorded",
            RepairPartCheck.NOT_READ_YET: f"{what}: no fingerprint read since the repair",
        }[self.outcome]


def repair_check(parts: Sequence[Mapping[str, Any]], after: Mapping[str, Any] | None) -> list[PartCheck]:
    """Each part of a repair against the first fingerprint read after it (None: none yet): its
    installed serial should be reported, its removed serial no longer."""
    seen = identifiers(after) if after is not None else set()
    checks = []
    for part in parts:
        installed = str(part.get("installed_serial") or "").strip()
        removed = str(part.get("removed_serial") or "").strip()
        if after is None:
            outcome = RepairPartCheck.NOT_READ_YET
        elif removed and _fold(removed) in seen and _fold(removed) != _fold(installed):
            outcome = RepairPartCheck.REMOVED_STILL_SEEN
        elif not installed:
            outcome = RepairPartCheck.NO_SERIAL
        elif _fold(installed) in seen:
            outcome = RepairPartCheck.SEEN
        else:
            outcome = RepairPartCheck.NOT_SEEN
        checks.append(PartCheck(str(part.get("kind") or ""), str(part.get("slot") or ""), installed, removed, outcome))
    return checks


def repair_mismatch(checks: Iterable[PartCheck]) -> bool:
    """Whether the hardware read after a repair contradicts what the repair record says."""
    return any(check.mismatch for check in checks)


def hardware_supersedes(
    *, bound: Mapping[str, Any] | None, previous: Mapping[str, Any] | None, new: Mapping[str, Any]
) -> list[Change]:
    """Why a device's current certificate stops holding now that `new` was read (empty: it
    stands). Against the fingerprint the certificate binds; a certificate from before fingerprints
    (binds none) against the one read before `new` — the hardware changed while it stood. The very
    first fingerprint of a device has nothing to compare with."""
    if bound is not None:
        return supersedes(bound, new)
    if previous is not None:
        return supersedes(previous, new)
    return []
