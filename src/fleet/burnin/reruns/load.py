"""What rerun planning reads, in a constant number of queries whatever the selection's size."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import NamedTuple
from uuid import UUID, uuid4

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db.models import Q, QuerySet

from fleet.burnin.selectors import latest_execution_sql
from fleet.burnin.tables import sql
from fleet.core.locks import lock_keys_in_pk_order
from fleet.core.replica import read_connection
from fleet.core.rows import bulk_read_cursor, id_text, ids_sql, recordset
from fleet.core.statements import Statement
from fleet.inventory.models import Device, Satellite, Site, TopologyMembership
from fleet.jobs.models import Job, JobDevice
from fleet.policies.models import AcceptancePolicy, ParameterProfile, Requirement
from fleet_rules.eligibility import enrolled_sql
from fleet_rules.planning import (
    ActiveJobFacts,
    CohortKey,
    DeviceFacts,
    PlanningInput,
    PolicyFacts,
    ProfileFacts,
    ProgressFacts,
    RequirementFacts,
    TopologyFacts,
)


def check_selection(site: Site, device_ids: Sequence[UUID]) -> list[UUID]:
    """The selection without duplicates; a 400 naming `device_ids.N` for every id not at the site."""
    limit = settings.FLEET["RERUN_MAX_DEVICES"]
    if len(device_ids) > limit:
        raise ValidationError({"device_ids": [f"At most {limit} devices per request; got {len(device_ids)}."]})
    unique = list(dict.fromkeys(device_ids))
    at_site = set(Device.objects.filter(site=site, id__among=unique).values_list("id", flat=True))
    problems = {
        f"device_ids.{index}": [f"{device_id} is not a device of site {site.slug}."]
        for index, device_id in enumerate(device_ids)
        if device_id not in at_site
    }
    if problems:
        raise ValidationError(problems)
    return unique


def _cohort_members(selected: list[UUID]) -> QuerySet[TopologyMembership]:
    """The memberships of every topology a selected device belongs to (a subquery)."""
    topologies = TopologyMembership.objects.filter(device_id__among=selected).values("topology_id")
    return TopologyMembership.objects.filter(topology_id__in=topologies)


def lock_involved_devices(selected: list[UUID]) -> set[UUID]:
    """Locks the selection and every device sharing one of its topologies (cohort members), in
    primary-key order, and returns their ids (one query)."""
    involved = Q(id__among=selected) | Q(id__in=_cohort_members(selected).values("device_id"))
    return set(lock_keys_in_pk_order(Device.objects.filter(involved)))


class DeviceRow(NamedTuple):
    id: UUID
    hostname: str
    site_id: UUID
    satellite_id: UUID
    resource_class: str
    state: str
    enrolled_at: datetime | None
    units: list[str] | None  # the device's memberships: units and topologies, pairwise
    topologies: list[UUID] | None


# Tuples, and the ids as one text value (`fleet.core.rows.id_text`): at 10,000 selected devices
# (65,000 with their cohorts) the ORM's `id__in` lists and instances were most of a dispatch.
DEVICES = Statement(
    "burnin.reruns.devices",
    sql(
        """
SELECT d.id, d.hostname, d.site_id, d.satellite_id, d.resource_class, d.state, d.enrolled_at, m.units, m.topologies
FROM unnest({selected}) AS wanted(id)
JOIN {device} d ON d.id = wanted.id
LEFT JOIN LATERAL (
    SELECT array_agg(m.unit) AS units, array_agg(m.topology_id) AS topologies FROM {membership} m
    WHERE m.device_id = d.id
) m ON true
""",
        selected=ids_sql("%(selected)s"),
    ),
    DeviceRow,
    example=lambda: {"selected": id_text([uuid4(), uuid4()])},
)


class CohortRow(NamedTuple):
    unit: str
    topology_id: UUID
    resource_class: str
    members: list[UUID]  # enrolled devices of the class, by id


#: `fleet_rules.planning.cohort_index` for the selected devices' topologies, in the database: the
#: members come as one id array per cohort, not as 65,000 devices' facts (at 10,000 selected).
COHORTS = Statement(
    "burnin.reruns.cohorts",
    sql(
        """
SELECT m.unit, m.topology_id, d.resource_class, array_agg(d.id ORDER BY d.id) AS members
FROM (SELECT DISTINCT s.topology_id FROM {membership} s WHERE s.device_id = ANY({selected})) c
JOIN {membership} m ON m.topology_id = c.topology_id
JOIN {device} d ON d.id = m.device_id
WHERE {enrolled}
GROUP BY m.unit, m.topology_id, d.resource_class
""",
        enrolled=enrolled_sql("d"),
        selected=ids_sql("%(selected)s"),
    ),
    CohortRow,
    example=lambda: {"selected": id_text([uuid4(), uuid4()])},
)


class TopologyRow(NamedTuple):
    id: UUID
    unit: str
    label: str
    satellite_id: UUID


TOPOLOGIES = Statement(
    "burnin.reruns.topologies",
    sql(
        """
SELECT t.id, t.unit, t.label, t.satellite_id FROM {topology} t WHERE t.id = ANY({wanted})
""",
        wanted=ids_sql("%(ids)s"),
    ),
    TopologyRow,
    example=lambda: {"ids": id_text([uuid4(), uuid4()])},
)


class TargetProgressRow(NamedTuple):
    """A projection row of one (requirement, target) of a group, named by positions: the group's
    (from 0), the requirement's and the target's in the group's lists (ordinality, from 1)."""

    group_n: int
    requirement_n: int
    target_n: int
    verdict: str
    policy_version: int
    decides_latest: bool


#: Each target's projection row, and whether it decided the target's latest execution, for groups
#: of requirements × targets (one JSON document: `requirements` and `targets` as id text, `device`
#: whether the targets are devices); a target without a row returns nothing. A row names its target
#: by positions (group, requirement, target), small integers, and the executions by that one
#: boolean, not by uuids: at 10,000 devices decoding the 136,000 target uuids cost about 0.4 s, and
#: the 120,000 execution uuids (each row's and its target's latest) 0.27 s (profiled).
TARGETS = Statement(
    "burnin.reruns.targets",
    sql(
        """
SELECT g.n AS group_n, q.n AS requirement_n, target.n AS target_n, p.verdict, p.policy_version,
       p.execution_id IS NOT DISTINCT FROM x.id AS decides_latest
FROM jsonb_to_recordset(%(groups)s::jsonb) AS g(n integer, requirements text, targets text, device boolean)
CROSS JOIN LATERAL unnest({requirements}) WITH ORDINALITY AS q(id, n)
CROSS JOIN LATERAL unnest({targets}) WITH ORDINALITY AS target(id, n)
CROSS JOIN LATERAL (
    SELECT q.id AS requirement_id, CASE WHEN g.device THEN target.id END AS device_id,
           CASE WHEN NOT g.device THEN target.id END AS topology_id
) t
CROSS JOIN LATERAL (
    SELECT p.verdict, p.policy_version, p.execution_id FROM {progress} p
    WHERE p.requirement_id = t.requirement_id AND p.target_id = target.id OFFSET 0
) p
LEFT JOIN LATERAL {latest} x ON true
""",
        latest=latest_execution_sql("t", "e.id"),
        requirements=ids_sql("g.requirements"),
        targets=ids_sql("g.targets"),
    ),
    TargetProgressRow,
    example=lambda: {
        "groups": recordset(
            {"n": n, "requirements": id_text([uuid4()]), "targets": id_text([uuid4(), uuid4()]), "device": device}
            for n, device in enumerate((True, False))
        )
    },
)


def _devices(selected: list[UUID]) -> dict[UUID, DeviceFacts]:
    with bulk_read_cursor(read_connection()) as cursor:
        rows = DEVICES.rows(cursor, {"selected": id_text(selected)})
    devices = {}
    for row in rows:
        devices[row.id] = DeviceFacts(
            id=row.id,
            hostname=row.hostname,
            site_id=row.site_id,
            satellite_id=row.satellite_id,
            resource_class=row.resource_class,
            state=row.state,
            enrolled_at=row.enrolled_at,
            topologies=dict(zip(row.units or (), row.topologies or (), strict=True)),
        )
    return devices


def _cohorts(selected: list[UUID]) -> dict[CohortKey, tuple[UUID, ...]]:
    with read_connection().cursor() as cursor:
        rows = COHORTS.rows(cursor, {"selected": id_text(selected)})
    return {(row.unit, row.topology_id, row.resource_class): tuple(row.members) for row in rows}


def _topologies(topology_ids: set[UUID]) -> dict[UUID, TopologyFacts]:
    with read_connection().cursor() as cursor:
        rows = TOPOLOGIES.rows(cursor, {"ids": id_text(topology_ids)})
    return {
        row.id: TopologyFacts(id=row.id, unit=row.unit, label=row.label, satellite_id=row.satellite_id) for row in rows
    }


def _targets(groups: list[tuple[list[UUID], list[UUID], bool]]) -> dict[tuple[UUID, UUID], ProgressFacts]:
    """The projection rows of these (requirements × targets) groups."""
    progress: dict[tuple[UUID, UUID], ProgressFacts] = {}
    document = recordset(
        {"n": n, "requirements": id_text(requirements), "targets": id_text(targets), "device": device}
        for n, (requirements, targets, device) in enumerate(groups)
    )
    with read_connection().cursor() as cursor:
        rows = TARGETS.rows(cursor, {"groups": document})
    for row in rows:
        requirements, targets, _ = groups[row.group_n]
        # ordinality counts from 1
        progress[(requirements[row.requirement_n - 1], targets[row.target_n - 1])] = ProgressFacts(
            verdict=row.verdict, policy_version=row.policy_version, decides_latest=row.decides_latest
        )
    return progress


def load_planning_input(
    *, selected: list[UUID], mode: str, only: Mapping[UUID, frozenset[str]] | None = None
) -> PlanningInput:
    """The facts of what planning judges, the selected devices and their topologies, and of the
    cohort members outside the selection only their ids and active jobs: such a member blocks its
    cohort whatever its other facts say. `only` restricts devices to some requirements (a target
    selection: `PlanningInput.only`)."""
    devices = _devices(selected)
    topologies = _topologies({t for d in devices.values() for t in d.topologies.values()})
    resource_classes = {d.resource_class for d in devices.values()}
    requirements_by_policy: dict[UUID, list[RequirementFacts]] = defaultdict(list)
    policies_raw = list(AcceptancePolicy.objects.filter(resource_class__in=resource_classes))
    for r in Requirement.objects.filter(policy__in=policies_raw, retired_at__isnull=True).order_by("name"):
        requirements_by_policy[r.policy_id].append(
            RequirementFacts(r.id, r.name, r.gate, r.scope, r.unit, r.test, r.rerunnable, r.parameter_constraints)
        )
    policies = {
        p.resource_class: PolicyFacts(p.resource_class, p.version, tuple(requirements_by_policy[p.id]))
        for p in policies_raw
    }
    chosen = [devices[d] for d in selected]
    groups: list[tuple[list[UUID], list[UUID], bool]] = []
    for policy in policies.values():
        of_class = [d for d in chosen if d.resource_class == policy.resource_class]
        groups.append(([r.id for r in policy.single_node], sorted(d.id for d in of_class), True))
        for rack in policy.requirements:
            if rack.multi_node and rack.unit:
                cohorts = {t for d in of_class if (t := d.topologies.get(rack.unit)) is not None and t in topologies}
                groups.append(([rack.id], sorted(cohorts), False))
    progress = _targets(groups)
    active_jobs = {
        device_id: ActiveJobFacts(job_id, workflow, frozenset(Job.requirement_names_of(parameters)), topology_id)
        for device_id, job_id, workflow, parameters, topology_id in JobDevice.objects.filter(
            Q(device_id__among=selected) | Q(device_id__in=_cohort_members(selected).values("device_id")), active=True
        ).values_list("device_id", "job_id", "job__workflow_name", "job__parameters", "job__topology_id")
    }
    profiles = [
        ProfileFacts(p.id, p.resource_class, p.test, p.name, p.parameters, p.created_at)
        for p in ParameterProfile.objects.filter(resource_class__in=resource_classes)
    ]
    satellite_ids = {d.satellite_id for d in devices.values()} | {t.satellite_id for t in topologies.values()}
    workflows = {
        s.id: frozenset(w.get("name") for w in s.advertised_workflows or [])
        for s in Satellite.objects.filter(id__in=satellite_ids).only("id", "advertised_workflows")
    }
    return PlanningInput(
        selected=tuple(selected),
        mode=mode,
        devices=devices,
        cohorts=_cohorts(selected),
        policies=policies,
        progress=progress,
        active_jobs=active_jobs,
        profiles=profiles,
        topologies=topologies,
        workflows=workflows,
        only=dict(only or {}),
    )
