"""Loading threshold resolutions from the database (the rule itself: tests/rules/test_resolution.py)."""

from __future__ import annotations

from fleet.policies.models import ThresholdRule
from fleet.policies.selectors import load_resolutions
from fleet_rules.resolution import Rule, resolve


def test_loader_resolves_each_pair_from_the_database(fleet):
    site, other = fleet.site(), fleet.site()
    policy = fleet.policy()
    requirement = fleet.requirement(
        policy,
        thresholds=[
            {"metric": "bw_gbps", "statistic": "min", "comparator": "gte", "threshold": 360},
        ],
    )
    ThresholdRule.objects.create(
        requirement=requirement, metric="bw_gbps", statistic="min", comparator="gte", threshold=350, site=site
    )
    resolutions = load_resolutions([(requirement.id, site.id), (requirement.id, other.id)])
    assert resolutions[(requirement.id, site.id)].rules[0]["threshold"] == 350
    assert resolutions[(requirement.id, other.id)].rules[0]["threshold"] == 360
    assert resolutions[(requirement.id, other.id)].key == resolve([Rule("bw_gbps", "min", "gte", 360)], other.id).key
