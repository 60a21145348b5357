"""The rules core is importable and usable with no Django at all: checked in a fresh interpreter,
where nothing else could have imported Django first."""

from __future__ import annotations

import subprocess
import sys

import pytest

pytestmark = pytest.mark.process

PROGRAM = """
import sys
import fleet_rules.eligibility, fleet_rules.evaluations, fleet_rules.evidence, fleet_rules.explanations
import fleet_rules.jobs, fleet_rules.planning, fleet_rules.resolution, fleet_rules.verdicts
import fleet_rules.vocabulary, fleet_rules.evidence_pack, fleet_rules.autopilot, fleet_rules.blast_radius
loaded = sorted(m for m in sys.modules if m.split(".")[0] in {"django", "rest_framework", "psycopg", "fleet"})
print(",".join(loaded))
"""


def test_importing_every_rules_module_loads_no_django_and_no_service_code():
    result = subprocess.run([sys.executable, "-c", PROGRAM], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == ""
