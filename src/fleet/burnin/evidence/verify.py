"""Offline verification of an evidence pack: the zip is readable, the manifest is in its canonical
form and signed by a published key, and every other file is whole (its SHA-256 is the manifest's)
and listed. Each refusal names its reason: the file whose hash differs, a bad signature, an
unknown key."""

from __future__ import annotations

import io
import json
import zipfile
import zlib
from collections.abc import Mapping
from dataclasses import dataclass

from fleet.burnin.certificates.ed25519 import signature_valid
from fleet_rules import evidence_pack as rules

MAX_MEMBERS = 10_000


@dataclass(frozen=True)
class PackVerdict:
    ok: bool
    reasons: tuple[str, ...]
    key_id: str | None = None
    files: int = 0


def _refused(*reasons: str) -> PackVerdict:
    return PackVerdict(False, reasons)


def _members(data: bytes) -> dict[str, bytes] | str:
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            infos = archive.infolist()
            if len(infos) > MAX_MEMBERS:
                return f"the archive holds {len(infos)} files, more than a pack ever does"
            declared = sum(info.file_size for info in infos)
            if declared > rules.MAX_PACK_BYTES:
                return _past_pack()
            members: dict[str, bytes] = {}
            inflated = 0
            for info in infos:
                if info.filename in members:
                    return f"{json.dumps(info.filename)} appears twice in the archive"
                if info.file_size > rules.MAX_MEMBER_BYTES:
                    return _past_member(info.filename)
                read = _inflate(archive, info, rules.MAX_PACK_BYTES - inflated)
                if isinstance(read, str):
                    return read
                members[info.filename] = read
                inflated += len(read)
            return members
    except (zipfile.BadZipFile, zipfile.LargeZipFile, zlib.error, OSError, ValueError, EOFError) as exc:
        return f"not a readable zip archive: {exc}"


def _past_member(name: str) -> str:
    return (
        f"{json.dumps(name)} inflates past {rules.MAX_MEMBER_BYTES // 2**20} MiB (MAX_MEMBER_BYTES): not a pack's file"
    )


def _past_pack() -> str:
    return f"the archive inflates past {rules.MAX_PACK_BYTES // 2**20} MiB (MAX_PACK_BYTES): not a pack"


def _inflate(archive: zipfile.ZipFile, info: zipfile.ZipInfo, room: int) -> bytes | str:
    """One member, read in chunks and counted as its bytes come out (a header may lie), stopping at
    its own bound and at what is left of the pack's (a reason then); the CRC-32 is checked at the end."""
    chunks: list[bytes] = []
    size = 0
    with archive.open(info) as member:
        while chunk := member.read(rules.READ_CHUNK_BYTES):
            size += len(chunk)
            if size > rules.MAX_MEMBER_BYTES:
                return _past_member(info.filename)
            if size > room:
                return _past_pack()
            chunks.append(chunk)
    return b"".join(chunks)


def verify_pack(data: bytes, keys: Mapping[str, bytes]) -> PackVerdict:
    """Check one pack against the published keys (key id → raw Ed25519 public key)."""
    members = _members(data)
    if isinstance(members, str):
        return _refused(members)
    for required in (rules.MANIFEST, rules.SIGNATURE):
        if required not in members:
            return _refused(f"{required} is missing from the pack")
    manifest_bytes = members[rules.MANIFEST]
    try:
        document = json.loads(manifest_bytes)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        return _refused(f"{rules.MANIFEST} is not JSON: {exc}")
    if not isinstance(document, dict) or document.get("format") != rules.FORMAT:
        return _refused(f"{rules.MANIFEST} is not a {rules.FORMAT} manifest")
    try:
        canonical = rules.canonical(document)
    except Exception as exc:  # rfc8785 refuses what it cannot canonicalise
        return _refused(f"{rules.MANIFEST} has no canonical form: {exc}")
    if canonical != manifest_bytes:
        return _refused(f"{rules.MANIFEST} is not in its RFC 8785 canonical form (it was edited)")
    try:
        signature = json.loads(members[rules.SIGNATURE])
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        return _refused(f"{rules.SIGNATURE} is not JSON: {exc}")
    if not isinstance(signature, dict) or signature.get("algorithm") != rules.ALGORITHM:
        return _refused(f"{rules.SIGNATURE} is not an {rules.ALGORITHM} signature")
    key_id = signature.get("key_id")
    key = keys.get(key_id) if isinstance(key_id, str) else None
    if key is None:
        return _refused(f"unknown key {json.dumps(key_id)}: not among the published keys")
    if not isinstance(signature.get("signature"), str) or not signature_valid(key, signature["signature"], canonical):
        return _refused(f"bad signature: {rules.SIGNATURE} does not match the manifest's canonical bytes")
    problems = rules.file_problems(document, members)
    if problems:
        return PackVerdict(False, tuple(problems), key_id)
    return PackVerdict(True, (f"signature valid (key {key_id}); {len(members) - 2} file(s) whole",), key_id)
