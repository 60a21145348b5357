"""Evaluation-result payloads as the agent's evaluator writes them (plain data: no Django)."""

from __future__ import annotations


def passing_payload(metric: str = "diag_failed_tests", threshold=0, comparator: str = "eq") -> dict:
    return {
        "passed": True,
        "reason": None,
        "metric_evaluations": {
            metric: {
                "passed": True,
                "value_evaluation": {"passed": True, "threshold": threshold, "comparator": comparator},
                "statistic_evaluations": None,
            }
        },
    }


def failing_payload(metric: str = "diag_failed_tests", threshold=0, comparator: str = "eq") -> dict:
    return {
        "passed": False,
        "reason": f"{metric}: 2 is not {comparator} {threshold}",
        "metric_evaluations": {
            metric: {
                "passed": False,
                "value_evaluation": {"passed": False, "threshold": threshold, "comparator": comparator},
                "statistic_evaluations": None,
            }
        },
    }


# --- hardware fingerprints (the execution report's `inventory`) ---------------------------------


def inventory_gpu(index: int, serial: str | None = None, **fields) -> dict:
    return {
        "uuid": f"GPU-{index:08d}-aaaa-bbbb-cccc-000000000000",
        "serial": serial if serial is not None else f"16520200{index:05d}",
        "pci_bus_id": f"00000000:{0x18 + index * 0x10:02X}:00.0",
        "vbios_version": "96.00.89.00.01",
        "part_number": "692-2G520-0200-000",
        "product_name": "NVIDIA H100 80GB HBM3",
    } | fields


def inventory(gpus: int = 8, **fields) -> dict:
    return {
        "driver_version": "550.54.15",
        "cuda_version": "12.4",
        "gpus": [inventory_gpu(i) for i in range(gpus)],
        "hcas": [
            {
                "name": f"mlx5_{i}",
                "firmware_version": "28.39.1002",
                "node_guid": f"0xa088c20300{i:06x}",
                "ports": [{"port": 1, "state": "Active", "rate_gbps": 400}],
            }
            for i in range(2)
        ],
        "host": {"bios_version": "2.1.3", "system_serial": "SYS-0001"},
        "missing": [],
    } | fields


def rack_collective(rack, members: dict, **overrides) -> dict:
    """A finished `rack-nccl` execution report of `rack`, with each member's health window
    (`members`: device → health evidence)."""
    return {
        "requirement": "rack-nccl",
        "topology_id": str(rack.id),
        "status": "completed",
        "metrics": {"busbw_gbps": {"value": 370.0}},
        "started_at": "2026-11-30T10:00:00Z",
        "finished_at": "2026-11-30T10:30:00Z",
        "member_health": [{"device_id": str(d.id), "health": h} for d, h in members.items()],
    } | overrides
