"""Issue 42 (4): a zip bomb is refused before it is inflated into memory. A verifier reads an
evidence pack member by member in bounded chunks and stops at the pack format's own limits
(`fleet_rules.evidence_pack.MAX_MEMBER_BYTES`, `MAX_PACK_BYTES`): a pack whose files together, or
one file alone, inflate past them is refused naming the limit, whatever its headers say. No
database: `verify_pack` is a pure reader."""

from __future__ import annotations

import io
import time
import tracemalloc
import zipfile

from fleet.burnin.evidence.verify import verify_pack
from fleet_rules import evidence_pack as rules

MIB = 1024 * 1024
CHUNK = b"\0" * MIB


def _bomb(members: int, each_mib: int) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED, compresslevel=1) as archive:
        for i in range(members):
            with archive.open(f"executions/{i:04d}.json", "w", force_zip64=True) as member:
                for _ in range(each_mib):
                    member.write(CHUNK)
    return buffer.getvalue()


def _verified(data: bytes) -> tuple[tuple[str, ...], float, int]:
    tracemalloc.start()
    started = time.monotonic()
    verdict = verify_pack(data, {})
    took = time.monotonic() - started
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert not verdict.ok
    return verdict.reasons, took, peak


def test_the_limits_are_the_pack_formats_own_and_a_real_pack_is_far_below_them():
    assert rules.MAX_MEMBER_BYTES < rules.MAX_PACK_BYTES
    assert rules.MAX_PACK_BYTES <= 256 * MIB


def test_members_each_within_the_bound_but_together_past_the_packs_are_refused_without_inflating_them():
    each = rules.MAX_MEMBER_BYTES // MIB - 1
    members = rules.MAX_PACK_BYTES // (each * MIB) + 2
    data = _bomb(members, each)

    reasons, took, peak = _verified(data)

    assert any("inflates past" in r and "MAX_PACK_BYTES" in r for r in reasons), reasons
    assert peak < 8 * MIB, f"{peak / MIB:.0f} MiB held while refusing a {len(data) / MIB:.1f} MiB pack"
    assert took < 2, took


def test_one_member_past_its_bound_is_refused_reading_at_most_its_bound():
    data = _bomb(1, rules.MAX_MEMBER_BYTES // MIB + 4)

    reasons, _, peak = _verified(data)

    assert any("MAX_MEMBER_BYTES" in r for r in reasons), reasons
    assert peak < 8 * MIB, f"{peak / MIB:.0f} MiB held"
