from __future__ import annotations

from dataclasses import dataclass

import pytest


@dataclass
class Scene:
    site: object
    satellite: object
    other_satellite: object
    devices: list
    policy: object
    requirement: object


@pytest.fixture
def scene(fleet) -> Scene:
    """One site, two satellites, six devices on sat-a, a policy with one single-node requirement."""
    site = fleet.site("lon-1")
    satellite = fleet.satellite(site, "sat-a")
    other = fleet.satellite(site, "sat-b")
    devices = [fleet.device(satellite, hostname=f"a01-n{i:02d}") for i in range(6)]
    policy = fleet.policy()
    requirement = fleet.requirement(policy, "gpu-diag", test="dcgm-diag")
    return Scene(site, satellite, other, devices, policy, requirement)
