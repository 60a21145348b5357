"""`fleet evidence-pack verify FILE --keys URL-or-FILE` as a pure reader: run by the `fleet` command
before Django loads (no settings, no database, no data folder), it reads the pack and the keys and
prints a verdict — nothing is written anywhere. The management command prints through the same
`verdict_lines`."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

from fleet.burnin.certificates.verify import read_keys
from fleet.burnin.evidence.verify import verify_pack
from fleet_rules import evidence_pack as rules


def read_pack(name: str) -> bytes:
    """The pack's bytes (OSError when unreadable, ValueError when larger than a pack can be)."""
    path = Path(name)
    if path.stat().st_size > rules.MAX_PACK_BYTES:
        raise ValueError(f"larger than {rules.MAX_PACK_BYTES // 2**20} MiB (MAX_PACK_BYTES): not a pack")
    return path.read_bytes()


def verdict_lines(name: str, keys: Mapping[str, bytes]) -> tuple[bool, list[str]]:
    """(valid, the lines to print): one per reason, `FILE: OK|REFUSED: why`."""
    try:
        data = read_pack(name)
    except (OSError, ValueError) as exc:
        return False, [f"{name}: REFUSED: cannot read it: {exc}"]
    verdict = verify_pack(data, keys)
    return verdict.ok, [f"{name}: {'OK' if verdict.ok else 'REFUSED'}: {reason}" for reason in verdict.reasons]


def names_keys(args: Sequence[str]) -> bool:
    return any(a == "--keys" or a.startswith("--keys=") for a in args)


def main(args: Sequence[str]) -> int:
    """Exit 0 when the pack is whole and signed by one of the keys, 1 when refused, 2 on a usage error."""
    parser = argparse.ArgumentParser(prog="fleet evidence-pack verify")
    parser.add_argument("file", metavar="FILE")
    parser.add_argument("--keys", required=True)
    parser.add_argument("--token", default=os.environ.get("FLEET_TOKEN"))
    options = parser.parse_args(list(args))
    try:
        keys = read_keys(options.keys, options.token)
    except (OSError, ValueError) as exc:
        sys.stderr.write(f"fleet: cannot read keys from {options.keys}: {exc}\n")
        return 1
    ok, lines = verdict_lines(options.file, keys)
    sys.stdout.write("".join(f"{line}\n" for line in lines))
    return 0 if ok else 1
