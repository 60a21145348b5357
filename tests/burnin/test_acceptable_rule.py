"""'Acceptable by its rows' has one Python form (`fleet_rules.certificates.rows_all_passed`) and one
SQL form (`fleet.burnin.fragments.acceptable_sql`, read by the certificate pre-filter; the dashboard counts the
certificates it leads to): the same cases, built as real rows, give the same answer in both."""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import pytest
from django.db import connection
from django.utils import timezone
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fleet.burnin.fragments import acceptable_sql
from fleet.burnin.models import PolicyProgress
from fleet.burnin.tables import sql
from fleet.policies.models import AcceptancePolicy
from fleet_rules.certificates import rows_all_passed
from fleet_rules.vocabulary import Verdict
from tests.builders import FleetBuilder

_classes = itertools.count()

ACCEPTABLE = sql(
    """SELECT {acceptable} FROM {device} d LEFT JOIN {policy} pol ON pol.resource_class = d.resource_class
    WHERE d.id = %(device)s""",
    acceptable=acceptable_sql("d", "pol.id", "pol.version"),
    policy=AcceptancePolicy._meta.db_table,
)


@dataclass(frozen=True)
class Req:
    """A requirement of the case's policy and the row that judges the device for it."""

    multi_node: bool = False
    retired: bool = False
    in_topology: bool = True  # a multi-node requirement: the device is in a topology of its unit
    verdict: str | None = Verdict.PASSED  # None: no row
    current_version: bool = True  # the row is at the policy's current version


def _python(policy: bool, reqs: list[Req]) -> bool:
    version = 3 if policy else None
    rows = []
    for req in reqs:
        if req.retired:
            continue
        has_target = not req.multi_node or req.in_topology
        if req.verdict is None or not has_target:
            rows.append((None, None))
        else:
            rows.append((req.verdict, 3 if req.current_version else 2))
    return rows_all_passed(version, rows)


def _sql(fleet: FleetBuilder, policy: bool, reqs: list[Req]) -> bool:
    rc = f"gpu.case{next(_classes)}"
    site = fleet.site()
    satellite = fleet.satellite(site)
    rack = fleet.topology(satellite)
    device = fleet.device(satellite, rc, topologies=[rack] if any(r.in_topology for r in reqs) else [])
    if policy:
        pol = fleet.policy(rc, version=3)
        for req in reqs:
            requirement = fleet.requirement(
                pol, scope="multi_node" if req.multi_node else "single_node", retired=req.retired
            )
            target = rack if req.multi_node else device
            if req.verdict is None or (req.multi_node and not req.in_topology):
                continue
            PolicyProgress.objects.create(
                site=site,
                satellite=satellite,
                resource_class=rc,
                requirement=requirement,
                gate=requirement.gate,
                device=None if req.multi_node else device,
                topology=rack if req.multi_node else None,
                target_id=target.id,
                verdict=req.verdict,
                policy_version=3 if req.current_version else 2,
                reconciled_at=timezone.now(),
                created_at=timezone.now(),
            )
    with connection.cursor() as cursor:
        cursor.execute(ACCEPTABLE, {"device": device.id})
        (answer,) = cursor.fetchone()
    return answer


CASES = {
    "no policy": (False, [Req()]),
    "a policy without requirements": (True, []),
    "only retired requirements": (True, [Req(retired=True)]),
    "one passed row at the current version": (True, [Req()]),
    "passed at an older version": (True, [Req(current_version=False)]),
    "failed": (True, [Req(verdict=Verdict.FAILED)]),
    "errored": (True, [Req(verdict=Verdict.ERRORED)]),
    "no row": (True, [Req(verdict=None)]),
    "rack passed": (True, [Req(), Req(multi_node=True)]),
    "no rack of the unit": (True, [Req(), Req(multi_node=True, in_topology=False)]),
    "rack failed": (True, [Req(), Req(multi_node=True, verdict=Verdict.FAILED)]),
    "a retired failing requirement is ignored": (True, [Req(), Req(retired=True, verdict=Verdict.FAILED)]),
    "one of two not run": (True, [Req(), Req(verdict=Verdict.NOT_RUN)]),
}


@pytest.mark.django_db
@pytest.mark.parametrize("case", list(CASES), ids=list(CASES))
def test_sql_and_python_agree_on_each_case(case):
    policy, reqs = CASES[case]
    assert _sql(FleetBuilder(), policy, reqs) == _python(policy, reqs)


def test_the_table_holds_both_answers():
    answers = {_python(policy, reqs) for policy, reqs in CASES.values()}
    assert answers == {True, False}


_reqs = st.lists(
    st.builds(
        Req,
        multi_node=st.booleans(),
        retired=st.booleans(),
        in_topology=st.booleans(),
        verdict=st.sampled_from([None, *Verdict.values]),
        current_version=st.booleans(),
    ),
    max_size=4,
)


@pytest.mark.django_db
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(policy=st.booleans(), reqs=_reqs)
def test_sql_and_python_agree_on_any_case(policy, reqs):
    assert _sql(FleetBuilder(), policy, reqs) == _python(policy, reqs)
