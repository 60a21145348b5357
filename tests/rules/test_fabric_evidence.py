"""The InfiniBand ports' evidence read back by the rules (issue 38, item 4): `fabric_rows` for the pages and the
evidence pack's manifest, which names the ports worth a reader's eye, without a database."""

from __future__ import annotations

from datetime import UTC, datetime
from uuid import UUID

from fleet_rules import evidence_pack as rules
from fleet_rules.health_evidence import fabric_rows, health_read

T0 = datetime(2026, 12, 3, 12, 0, tzinfo=UTC)


def port(name: str, before: int, after: int, **extra) -> dict:
    return {
        "port": name,
        "state_before": "ACTIVE",
        "state_after": "ACTIVE",
        "before": {"link_downed": before, "symbol_error": 0},
        "after": {"link_downed": after, "symbol_error": 0},
        "saturated": [],
        "reset": [],
    } | extra


HEALTH = {
    "window": {"since": "2026-12-03T11:00:00Z", "until": "2026-12-03T12:00:00Z"},
    "source": "journalctl",
    "xid_events": [],
    "ecc": {},
    "fabric": {
        "source": "sysfs",
        "ports": [
            port("mlx5_0/1", 1, 4),
            port("mlx5_1/1", 255, 255, saturated=["link_downed"]),
            port("mlx5_2/1", 0, 1, state_after="DOWN"),
            port("mlx5_3/1", 0, 0),
        ],
    },
    "throttle_reasons_seen": [],
}


def test_fabric_rows_say_what_grew_what_cannot_be_known_and_which_link_stayed_down() -> None:
    grew, saturated, dropped, quiet = fabric_rows(HEALTH)

    assert [(c.metric, c.before, c.after, c.delta) for c in grew.grew] == [("link_downed", 1, 4, 3)]
    assert saturated.saturated == ["link_downed"] and saturated.grew == []
    assert dropped.went_down and not grew.went_down
    assert quiet.grew == [] and not quiet.saturated and not quiet.reset
    read = health_read(HEALTH)
    assert read is not None and read.fabric_source == "sysfs" and [p.port for p in read.fabric][0] == "mlx5_0/1"
    assert fabric_rows({"window": {}, "fabric": None}) == [] and fabric_rows(None) == []


def test_the_packs_manifest_names_the_ports_worth_a_look_and_leaves_the_quiet_ones_to_the_execution_file() -> None:
    device = rules.PackDevice(UUID(int=1), "a01-n04", "SN1", "gpu.h200.8x", UUID(int=2), "lon-1", "burn_in", None)
    report = rules.HealthReport(UUID(int=7), "gpu-health-window", T0, HEALTH)

    document = rules.manifest(
        device=device,
        policy=rules.PackPolicy("gpu.h200.8x", 3, None),
        history=[],
        history_total=0,
        repairs=[],
        repairs_total=0,
        targets=[],
        files={},
        generated_at=T0,
        generated_by="test",
        limits=rules.Limits(),
        health=[report],
        health_total=1,
    )

    (entry,) = document["health"]["reports"]
    assert [p["port"] for p in entry["fabric"]] == ["mlx5_0/1", "mlx5_1/1", "mlx5_2/1"]
    assert entry["fabric"][0]["grew"] == [{"counter": "link_downed", "before": 1, "after": 4, "delta": 3}]
    assert entry["fabric"][1]["saturated"] == ["link_downed"] and entry["fabric"][2]["state_after"] == "DOWN"
    assert rules.canonical(document)  # still canonicalises (signed as it is)
