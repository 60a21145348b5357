"""The demo's simulated fleet: what its agents are told to simulate, decided from the seed and the
devices' stable names only (hostnames, topology labels), so that `--seed 42` plays the same fleet
after `make reset` as before it (the device ids are new every time the fleet is applied).

Besides the executor's random share of faulty devices, the seed picks one member of each NVLink
domain with a permanent fabric fault: its own tests pass, and every collective of the domain that
includes it is slow. That is the case culprit isolation exists for, and the site's autopilot plays it
(`fleet.autopilot`, docs/autopilot.md)."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping

from fleet.inventory.models import Topology
from fleet_rules.vocabulary import TopologyUnit


def fabric_fault_members(seed: int, domains: Mapping[str, Iterable[str]]) -> list[str]:
    """One hostname per NVLink domain (label → member hostnames), picked by the seed (SHA-256:
    the same in every process and after every reset)."""
    chosen = []
    for label in sorted(domains):
        members = sorted(domains[label])
        if not members:
            continue
        digest = hashlib.sha256(f"{seed}\x1ffabric\x1f{label}".encode()).digest()
        chosen.append(members[int.from_bytes(digest[:8], "big") % len(members)])
    return chosen


def nvlink_domains() -> dict[str, list[str]]:
    """Every NVLink domain's label → its members' hostnames (one query)."""
    domains: dict[str, list[str]] = {}
    rows = Topology.objects.filter(unit=TopologyUnit.NVLINK_DOMAIN).values_list(
        "label", "memberships__device__hostname"
    )
    for label, hostname in rows:
        members = domains.setdefault(label, [])
        if hostname is not None:
            members.append(hostname)
    return domains


def agent_environment(*, seed: int, faulty_share: float, time_scale: float) -> dict[str, str]:
    """The simulated executor's settings every demo agent gets (`FLEET_AGENT_*`)."""
    return {
        "FLEET_AGENT_SEED": str(seed),
        "FLEET_AGENT_TIME_SCALE": str(time_scale),
        "FLEET_AGENT_FAULTY_SHARE": str(faulty_share),
        "FLEET_AGENT_FABRIC_FAULTS": ",".join(fabric_fault_members(seed, nvlink_domains())),
    }
