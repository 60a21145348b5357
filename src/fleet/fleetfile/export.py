"""`fleet export`: the database as a fleet file, in the same format `fleet apply` reads.

The output is deterministic (everything sorted by its natural key), so export → apply on an
empty database → export gives the identical file.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any
from uuid import UUID

import yaml

from fleet.autopilot.models import SiteAutopilot
from fleet.autopilot.services import DECLARED
from fleet.fleetfile.autopilot import autopilot_entry
from fleet.fleetfile.document import LifecycleDecl
from fleet.fleetfile.durations import duration_text
from fleet.inventory.models import Device, Satellite, Site, Topology, TopologyMembership
from fleet.policies.models import AcceptancePolicy, ParameterProfile, Requirement, ThresholdRule
from fleet_rules.gpu_vendors import DEFAULT_GPU_VENDOR


def fleet_export(site_slugs: list[str] | None = None) -> dict[str, Any]:
    chosen = Site.objects.order_by("slug")
    if site_slugs:
        chosen = chosen.filter(slug__in=site_slugs)
    sites = list(chosen)
    site_ids = [s.id for s in sites]
    satellites: dict[UUID, list[dict[str, Any]]] = defaultdict(list)
    satellite_names: dict[UUID, str] = {}
    for sat in Satellite.objects.filter(site_id__in=site_ids).order_by("name"):
        satellites[sat.site_id].append({"name": sat.name})
        satellite_names[sat.id] = sat.name
    topologies: dict[UUID, list[dict[str, Any]]] = defaultdict(list)
    for t in Topology.objects.filter(site_id__in=site_ids).order_by("unit", "label"):
        topologies[t.site_id].append({"unit": t.unit, "label": t.label, "satellite": satellite_names[t.satellite_id]})
    memberships: dict[UUID, dict[str, str]] = defaultdict(dict)
    for device_id, unit, label in TopologyMembership.objects.filter(device__site_id__in=site_ids).values_list(
        "device_id", "unit", "topology__label"
    ):
        memberships[device_id][unit] = label
    devices: dict[UUID, list[dict[str, Any]]] = defaultdict(list)
    for d in Device.objects.filter(site_id__in=site_ids).order_by("hostname").iterator(chunk_size=2000):
        entry: dict[str, Any] = {
            "hostname": d.hostname,
            "serial": d.serial,
            "resource_class": d.resource_class,
            "satellite": satellite_names[d.satellite_id],
            "state": d.state,
            "enrolled": d.enrolled_at is not None,
        }
        if memberships.get(d.id):
            entry["topologies"] = dict(sorted(memberships[d.id].items()))
        devices[d.site_id].append(entry)

    site_slug_by_id = dict(Site.objects.values_list("id", "slug"))
    rules = defaultdict(list)
    for rule in ThresholdRule.objects.order_by("metric", "statistic", "site__slug"):
        entry = {"metric": rule.metric}
        if rule.statistic is not None:
            entry["statistic"] = rule.statistic
        entry["comparator"] = rule.comparator
        entry["threshold"] = rule.threshold
        if rule.site_id:
            entry["site"] = site_slug_by_id[rule.site_id]
        rules[rule.requirement_id].append(entry)
    requirements = defaultdict(list)
    for r in Requirement.objects.order_by("name"):
        entry = {"name": r.name, "gate": r.gate, "scope": r.scope}
        if r.unit:
            entry["unit"] = r.unit
        entry["test"] = r.test
        if not r.rerunnable:
            entry["rerunnable"] = False
        if r.parameter_constraints:
            entry["parameter_constraints"] = r.parameter_constraints
        if r.retired_at is not None:
            entry["retired"] = True
        if r.consecutive_passes != 1:
            entry["consecutive_passes"] = r.consecutive_passes
        if r.outlier_k is not None:
            entry["outlier_k"] = r.outlier_k
        if r.evidence_valid_for is not None:
            entry["evidence_valid_for"] = duration_text(r.evidence_valid_for)
        if r.metric_units:
            entry["metrics"] = {metric: {"unit": unit} for metric, unit in sorted(r.metric_units.items())}
        entry["thresholds"] = rules[r.id]
        requirements[r.policy_id].append(entry)

    autopilots = {
        row.site_id: autopilot_entry(
            {k: getattr(row, k) for k in DECLARED} | {"class_limits": dict(sorted(row.class_limits.items()))}
        )
        for row in SiteAutopilot.objects.filter(site_id__in=site_ids)
    }
    document: dict[str, Any] = {
        "sites": [
            {
                "slug": s.slug,
                "name": s.name,
                "satellites": satellites[s.id],
                "topologies": topologies[s.id],
                "devices": devices[s.id],
            }
            | ({"autopilot": autopilots[s.id]} if autopilots.get(s.id) else {})
            for s in sites
        ],
        "policies": [],
        "parameter_profiles": [
            {"resource_class": p.resource_class, "test": p.test, "name": p.name, "parameters": p.parameters}
            for p in ParameterProfile.objects.order_by("resource_class", "test", "name")
        ],
    }
    for policy in AcceptancePolicy.objects.order_by("resource_class"):
        entry = {"resource_class": policy.resource_class}
        if policy.description:
            entry["description"] = policy.description
        if policy.gpu_vendor != DEFAULT_GPU_VENDOR:
            entry["gpu_vendor"] = policy.gpu_vendor
        entry["requirements"] = requirements[policy.id]
        lifecycle = _lifecycle(policy)
        if lifecycle:
            entry["lifecycle"] = lifecycle
        document["policies"].append(entry)
    return document


def _lifecycle(policy: AcceptancePolicy) -> dict[str, object]:
    """The policy's lifecycle settings that differ from the defaults (a file that says nothing means them)."""
    default = LifecycleDecl()
    entry: dict[str, object] = {}
    if policy.auto_accept != default.auto_accept:
        entry["auto_accept"] = policy.auto_accept
    if policy.repair_after_failures != default.repair_after_failures:
        entry["repair_after_failures"] = policy.repair_after_failures
    if policy.breaker_share != default.breaker_share:
        entry["breaker_share"] = policy.breaker_share
    if policy.breaker_window != default.breaker_window:
        entry["breaker_window"] = duration_text(policy.breaker_window)
    return entry


class _Dumper(yaml.SafeDumper):
    pass


def _flow_small_mappings(dumper: yaml.SafeDumper, data: dict) -> yaml.Node:
    flow = all(not isinstance(v, (dict, list)) for v in data.values()) and len(data) <= 6
    return dumper.represent_mapping("tag:yaml.org,2002:map", data.items(), flow_style=flow)


_Dumper.add_representer(dict, _flow_small_mappings)


def to_yaml(document: dict[str, Any]) -> str:
    return yaml.dump(document, Dumper=_Dumper, sort_keys=False, allow_unicode=True, width=120)
