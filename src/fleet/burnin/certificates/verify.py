"""Offline verification of certificate files: the signature over the RFC 8785 form of the
certificate, the document's format, and the chain between the files given."""

from __future__ import annotations

import base64
import binascii
import json
import urllib.request
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from fleet.burnin.certificates.ed25519 import ALGORITHM, signature_valid
from fleet_rules import certificates as rules
from fleet_rules import fingerprint


@dataclass(frozen=True)
class Verdict:
    ok: bool
    reason: str
    sha256: str | None = None


def parse_keys(data: object) -> dict[str, bytes]:
    """`{"keys": [{"key_id", "algorithm", "public_key"}]}` (the keys endpoint's body) → id → raw key."""
    if not isinstance(data, Mapping) or not isinstance(data.get("keys"), list):
        raise ValueError('a key list is {"keys": [{"key_id": …, "algorithm": "Ed25519", "public_key": …}]}')
    keys: dict[str, bytes] = {}
    for entry in data["keys"]:
        if not isinstance(entry, Mapping) or entry.get("algorithm") != ALGORITHM:
            continue
        try:
            raw = base64.b64decode(str(entry["public_key"]), validate=True)
        except (KeyError, binascii.Error) as exc:
            raise ValueError(f"key {entry.get('key_id')!r}: public_key is not base64") from exc
        keys[str(entry.get("key_id"))] = raw
    return keys


def read_keys(source: str, token: str | None = None) -> dict[str, bytes]:
    """The published keys from the keys endpoint's URL (with a bearer token) or a file of its JSON
    (OSError or ValueError when unreadable)."""
    if source.startswith(("http://", "https://")):
        headers = {"Accept": "application/json"} | ({"Authorization": f"Bearer {token}"} if token else {})
        request = urllib.request.Request(source, headers=headers)
        with urllib.request.urlopen(request, timeout=30) as response:
            data = json.loads(response.read())
    else:
        data = json.loads(Path(source).read_bytes())
    return parse_keys(data)


def verify_one(data: bytes, keys: Mapping[str, bytes]) -> Verdict:
    try:
        envelope = json.loads(data)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        return Verdict(False, f"not JSON: {exc}")
    if not isinstance(envelope, dict) or not {"certificate", "signature", "key_id"} <= set(envelope):
        return Verdict(False, "not a certificate envelope (certificate, signature, key_id)")
    certificate = envelope["certificate"]
    if not isinstance(certificate, dict) or certificate.get("format") != rules.FORMAT:
        return Verdict(False, f"not a {rules.FORMAT} certificate")
    try:
        canonical = rules.canonical(certificate)
    except Exception as exc:  # rfc8785 refuses what JSON cannot canonicalise (e.g. huge integers)
        return Verdict(False, f"no canonical form: {exc}")
    key = keys.get(str(envelope["key_id"]))
    if key is None:
        return Verdict(False, f"unknown key {envelope['key_id']!r}")
    if not isinstance(envelope["signature"], str) or not signature_valid(key, envelope["signature"], canonical):
        return Verdict(False, "signature does not match the certificate's canonical bytes")
    problem = fingerprint_problem(certificate.get("fingerprint"))
    if problem is not None:
        return Verdict(False, problem)
    return Verdict(True, f"signature valid (key {envelope['key_id']})", rules.sha256(canonical))


def fingerprint_problem(bound: object) -> str | None:
    """Why the hardware fingerprint a certificate binds is not what it says (its hash is the
    SHA-256 of its inventory's canonical form), or None. Certificates from before fingerprints have
    no such member; a device that reported none binds null."""
    if bound is None:
        return None
    if not isinstance(bound, Mapping) or not isinstance(bound.get("inventory"), Mapping):
        return "fingerprint is not {sha256, inventory}"
    try:
        digest = fingerprint.sha256(bound["inventory"])
    except Exception as exc:  # as above: what RFC 8785 cannot canonicalise
        return f"fingerprint has no canonical form: {exc}"
    if digest != bound.get("sha256"):
        return "fingerprint sha256 does not match its inventory"
    return None


def verify_files(files: Sequence[tuple[str, bytes]], keys: Mapping[str, bytes]) -> list[tuple[str, Verdict]]:
    """Each file on its own, then the chain: a certificate naming a previous one must name one of
    the same device among the files, when the files hold any other of that device."""
    results = [(name, verify_one(data, keys)) for name, data in files]
    digests = {name: verdict.sha256 for name, verdict in results if verdict.ok and verdict.sha256}
    documents = {name: json.loads(data)["certificate"] for name, data in files if name in digests}
    hashes_by_device: dict[str, set[str]] = {}
    for name, document in documents.items():
        hashes_by_device.setdefault(str(document["device"]["id"]), set()).add(digests[name] or "")
    chained = []
    for name, verdict in results:
        if name in documents:
            document = documents[name]
            previous = document.get("previous_certificate_sha256")
            others = hashes_by_device[str(document["device"]["id"])] - {verdict.sha256 or ""}
            if previous and others and previous not in others:
                verdict = Verdict(False, f"chain broken: previous certificate {previous[:12]}… is not among the files")
            elif previous and not others:
                verdict = Verdict(True, verdict.reason + "; chain not checked (previous certificate not given)")
            elif previous:
                verdict = Verdict(True, verdict.reason + "; chain intact", verdict.sha256)
        chained.append((name, verdict))
    return chained
