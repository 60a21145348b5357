"""A second resource class and a second satellite beside the burnt-in H200 site
(`conftest.build_site`), for the filters, the grid's default class and its pickers' scope."""

from __future__ import annotations

from fleet.burnin.reconcile.service import reconcile_sweep
from fleet_rules.vocabulary import WorkflowName
from tests.dashboard.conftest import DIAG_RULE, NCCL_RULE, RC, BurntIn

GB200 = "gpu.gb200.nvl72"  # sorts before gpu.h200.8x: the class a grid used to open on


def add_green_gb200_domain(world: BurntIn, trays: int = 4) -> None:
    """An NVLink domain `nvl72-b01` of GB200 trays (`b01-t00`…) on sat-a that passed everything."""
    fleet = world.fleet
    policy = fleet.policy(GB200)
    world.requirements["tray-diag"] = fleet.requirement(policy, "tray-diag", test="dcgm-diag", thresholds=[DIAG_RULE])
    world.requirements["nvl-nccl"] = fleet.requirement(
        policy, "nvl-nccl", scope="multi_node", unit="nvlink-domain", test="nccl-multi", thresholds=[NCCL_RULE]
    )
    fleet.profile(GB200, "dcgm-diag", {"level": 3})
    fleet.profile(GB200, "nccl-multi", {})
    domain = fleet.topology(world.satellite, "nvlink-domain", "nvl72-b01")
    for n in range(trays):
        tray = fleet.device(world.satellite, GB200, hostname=f"b01-t{n:02d}", topologies=[domain])
        world.report("tray-diag", device=tray, metrics={"diag_failed_tests": {"value": 0}})
    world.report("nvl-nccl", topology=domain, metrics={"busbw_gbps": {"value": 900.0, "unit": "GB/s"}})
    reconcile_sweep(site_slug=world.site.slug, satellite_name=world.satellite.name, resource_class=GB200)


def add_h200_rack_on_sat_b(world: BurntIn) -> None:
    """A second satellite `sat-b` managing rack `rack-b00` of two H200 devices (`b00-n00`, `b00-n01`)
    that passed their single-node requirements."""
    fleet = world.fleet
    satellite = fleet.satellite(world.site, "sat-b", workflows=list(WorkflowName.values))
    rack = fleet.topology(satellite, "rack", "rack-b00")
    for n in range(2):
        device = fleet.device(satellite, RC, hostname=f"b00-n{n:02d}", topologies=[rack])
        world.report("gpu-diag", device=device, metrics={"diag_failed_tests": {"value": 0}})
        world.report(
            "hbm-bandwidth",
            device=device,
            metrics={"hbm_bandwidth_tbps": {"value": 4.5, "unit": "TB/s", "statistics": {"min": 4.0}}},
        )
    reconcile_sweep(site_slug=world.site.slug, satellite_name=satellite.name, resource_class=RC)


def fail_gpu_diag_too(world: BurntIn, hostname: str = "a00-n00") -> None:
    """`hostname` (already failing hbm-bandwidth) fails gpu-diag as well: two failing rows, one device."""
    device = next(d for d in world.devices if d.hostname == hostname)
    world.report("gpu-diag", device=device, metrics={"diag_failed_tests": {"value": 2}})
    world.sweep()
