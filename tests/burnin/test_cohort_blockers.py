"""'Passed at the policy's version', the rule a cohort member must meet not to block its rack, has
one Python form (`fleet_rules.planning.passed_at_version`, which `single_node_shortfall` and the
planner read) and one SQL form (`fleet.burnin.fragments.passed_at_version_sql`, which the
dashboard's "blocked: …" reads): every case gives the same answer in both."""

from __future__ import annotations

import itertools

import pytest
from django.db import connection

from fleet.burnin.fragments import passed_at_version_sql
from fleet.burnin.tables import sql
from fleet_rules.planning import passed_at_version
from fleet_rules.vocabulary import Verdict

PASSED = sql(
    "SELECT {passed} FROM (SELECT %(verdict)s::text AS verdict, %(row)s::int AS policy_version) p",
    passed=passed_at_version_sql("p", "%(policy)s::int"),
)
CASES = list(itertools.product([None, *Verdict.values], [None, 1, 2], [1, 2]))


@pytest.mark.django_db
@pytest.mark.parametrize(("verdict", "row_version", "policy_version"), CASES)
def test_the_sql_and_the_python_agree(verdict, row_version, policy_version):
    with connection.cursor() as cursor:
        cursor.execute(PASSED, {"verdict": verdict, "row": row_version, "policy": policy_version})
        (answer,) = cursor.fetchone()
    assert answer is passed_at_version(verdict, row_version, policy_version)
